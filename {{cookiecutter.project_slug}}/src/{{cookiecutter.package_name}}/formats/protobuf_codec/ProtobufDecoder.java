package {{ cookiecutter.package_name }}.protobuf;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedInputStream;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.InvalidProtocolBufferException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;

/**
 * One writer schema's bodies (a value after the wire format's 5-byte header) to the reader's
 * message fields: `struct<fields: map<string,string>, reason: string>`. The message indexes are
 * read first (a zig-zag varint count, then each index; a lone 0 for the first message) and must
 * name the reader's message; its top-level scalar fields come out as text (Spark casts them to the
 * types `[schema]` gives; the plan checked the types), a field with presence left out when unset.
 * A body that is not the reader's message gives a null map and the reason.
 */
public final class ProtobufDecoder implements UDF1<byte[], Row> {
  private static final long serialVersionUID = 1L;

  private final byte[] descriptorSet;
  private final String messageName;
  private final int schemaId;
  private transient FileDescriptor file;

  public ProtobufDecoder(byte[] descriptorSet, String messageName, int schemaId) {
    this.descriptorSet = descriptorSet;
    this.messageName = messageName;
    this.schemaId = schemaId;
    Descriptors.message(descriptorSet, messageName); // fails here, on the driver, if it is not there
  }

  @Override
  public Row call(byte[] body) {
    if (body == null) {
      return null;
    }
    if (file == null) {
      file = Descriptors.schemaFile(descriptorSet);
    }
    CodedInputStream input = CodedInputStream.newInstance(body);
    List<Integer> path = new ArrayList<>();
    try {
      int count = input.readSInt32();
      if (count < 0 || count > body.length) {
        return failed("message indexes do not decode: a count of " + count);
      }
      for (int i = 0; i < count; i++) {
        path.add(input.readSInt32());
      }
    } catch (IOException error) {
      return failed("message indexes do not decode: " + error.getMessage());
    }
    if (path.isEmpty()) {
      path.add(0);
    }
    Descriptor message = Descriptors.atPath(file, path);
    if (message == null) {
      return failed("message index " + path + " is not in schema id " + schemaId);
    }
    if (!message.getFullName().equals(messageName)) {
      return failed("message index " + path + " is " + message.getFullName() + " in schema id " + schemaId
          + ", not " + messageName);
    }
    DynamicMessage decoded;
    try {
      decoded = DynamicMessage.parseFrom(message, input);
    } catch (InvalidProtocolBufferException error) {
      return failed("body does not decode with schema id " + schemaId + " as " + messageName + ": "
          + firstSentence(error.getMessage()));
    } catch (IOException error) {
      return failed("body does not decode with schema id " + schemaId + ": " + error.getMessage());
    }
    Map<String, String> fields = new HashMap<>();
    for (FieldDescriptor field : message.getFields()) {
      if (field.isRepeated() || field.getJavaType() == FieldDescriptor.JavaType.MESSAGE) {
        continue;
      }
      if (field.hasPresence() && !decoded.hasField(field)) {
        continue;
      }
      fields.put(field.getName(), text(field, decoded.getField(field)));
    }
    return RowFactory.create(fields, null);
  }

  /** Protobuf's messages go on with advice about embedded messages; the first sentence says what failed. */
  private static String firstSentence(String message) {
    int end = message == null ? -1 : message.indexOf(".  ");
    return end < 0 ? String.valueOf(message) : message.substring(0, end + 1);
  }

  private static Row failed(String reason) {
    return RowFactory.create(null, reason);
  }

  /** A scalar as Spark's cast reads it: unsigned kinds unsigned, an enum by its name, bytes in base64. */
  static String text(FieldDescriptor field, Object value) {
    switch (field.getType()) {
      case UINT32:
      case FIXED32:
        return Integer.toUnsignedString((Integer) value);
      case UINT64:
      case FIXED64:
        return Long.toUnsignedString((Long) value);
      case ENUM:
        return ((EnumValueDescriptor) value).getName();
      case BYTES:
        return Base64.getEncoder().encodeToString(((ByteString) value).toByteArray());
      default:
        return String.valueOf(value);
    }
  }
}
