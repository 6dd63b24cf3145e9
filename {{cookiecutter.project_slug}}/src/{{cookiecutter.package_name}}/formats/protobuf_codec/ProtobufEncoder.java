package {{ cookiecutter.package_name }}.protobuf;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.DynamicMessage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.sql.Date;
import java.sql.Timestamp;
import java.time.Instant;
import java.time.LocalDate;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF1;

/**
 * An answer (a struct of its fields) to its value in the registry's wire format: the magic byte,
 * the schema id, the message indexes, then the message's body with every field of the answer set
 * by name (a null one left unset). A timestamp is written as microseconds since the epoch, a date
 * as days. The message's last field, `batch_id`, is the sink's to append (sink/batch_records.py).
 */
public final class ProtobufEncoder implements UDF1<Row, byte[]> {
  private static final long serialVersionUID = 1L;

  private final byte[] descriptorSet;
  private final String messageName;
  private final byte[] header;
  private transient Descriptor message;

  public ProtobufEncoder(byte[] descriptorSet, String messageName, int schemaId, int[] indexes) {
    this.descriptorSet = descriptorSet;
    this.messageName = messageName;
    Descriptors.message(descriptorSet, messageName); // fails here, on the driver, if it is not there
    try {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream();
      bytes.write(0);
      bytes.write(new byte[] {(byte) (schemaId >>> 24), (byte) (schemaId >>> 16), (byte) (schemaId >>> 8),
          (byte) schemaId});
      CodedOutputStream out = CodedOutputStream.newInstance(bytes);
      boolean first = indexes.length == 1 && indexes[0] == 0;
      out.writeSInt32NoTag(first ? 0 : indexes.length);
      if (!first) {
        for (int index : indexes) {
          out.writeSInt32NoTag(index);
        }
      }
      out.flush();
      this.header = bytes.toByteArray();
    } catch (IOException error) {
      throw new IllegalStateException(error);
    }
  }

  @Override
  public byte[] call(Row answer) {
    if (answer == null) {
      return null;
    }
    if (message == null) {
      message = Descriptors.message(descriptorSet, messageName);
    }
    DynamicMessage.Builder builder = DynamicMessage.newBuilder(message);
    List<String> names = List.of(answer.schema().fieldNames());
    for (int i = 0; i < names.size(); i++) {
      if (answer.isNullAt(i)) {
        continue;
      }
      FieldDescriptor field = message.findFieldByName(names.get(i));
      builder.setField(field, value(field, answer.get(i)));
    }
    byte[] body = builder.build().toByteArray();
    byte[] value = new byte[header.length + body.length];
    System.arraycopy(header, 0, value, 0, header.length);
    System.arraycopy(body, 0, value, header.length, body.length);
    return value;
  }

  /** Spark's value as the field's Java type (the plan checked that the two fit). */
  static Object value(FieldDescriptor field, Object value) {
    if (value instanceof Timestamp timestamp) {
      value = Math.addExact(Math.multiplyExact(Math.floorDiv(timestamp.getTime(), 1000L), 1_000_000L),
          timestamp.getNanos() / 1000L);
    } else if (value instanceof Instant instant) {
      value = Math.addExact(Math.multiplyExact(instant.getEpochSecond(), 1_000_000L), instant.getNano() / 1000L);
    } else if (value instanceof Date date) {
      value = date.toLocalDate().toEpochDay();
    } else if (value instanceof LocalDate date) {
      value = date.toEpochDay();
    } else if (value instanceof byte[] bytes) {
      return ByteString.copyFrom(bytes);
    }
    switch (field.getJavaType()) {
      case LONG:
        return ((Number) value).longValue();
      case INT:
        return ((Number) value).intValue();
      case DOUBLE:
        return ((Number) value).doubleValue();
      case FLOAT:
        return ((Number) value).floatValue();
      default:
        return value;
    }
  }
}
