package {{ cookiecutter.package_name }}.protobuf;

import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.DescriptorValidationException;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.InvalidProtocolBufferException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** A schema's message, built from the FileDescriptorSet protoc wrote (its imports first, as
 * `--include_imports` orders them); the last file is the schema's own. */
final class Descriptors {
  private Descriptors() {}

  static Descriptor message(byte[] descriptorSet, String fullName) {
    FileDescriptor file = schemaFile(descriptorSet);
    Descriptor found;
    for (Descriptor message : file.getMessageTypes()) {
      found = find(message, fullName);
      if (found != null) {
        return found;
      }
    }
    throw new IllegalArgumentException("message " + fullName + " is not in the schema");
  }

  /** The message at a path of indexes (the wire format's message indexes), or null. */
  static Descriptor atPath(FileDescriptor file, List<Integer> path) {
    List<Descriptor> level = file.getMessageTypes();
    Descriptor message = null;
    for (int index : path) {
      if (index < 0 || index >= level.size()) {
        return null;
      }
      message = level.get(index);
      level = message.getNestedTypes();
    }
    return message;
  }

  static FileDescriptor schemaFile(byte[] descriptorSet) {
    try {
      FileDescriptorSet set = FileDescriptorSet.parseFrom(descriptorSet);
      Map<String, FileDescriptor> built = new HashMap<>();
      FileDescriptor last = null;
      for (FileDescriptorProto proto : set.getFileList()) {
        FileDescriptor[] dependencies = proto.getDependencyList().stream().map(built::get)
            .toArray(FileDescriptor[]::new);
        last = FileDescriptor.buildFrom(proto, dependencies);
        built.put(proto.getName(), last);
      }
      if (last == null) {
        throw new IllegalArgumentException("the descriptor set holds no file");
      }
      return last;
    } catch (InvalidProtocolBufferException | DescriptorValidationException error) {
      throw new IllegalArgumentException("the descriptor set does not build: " + error.getMessage(), error);
    }
  }

  private static Descriptor find(Descriptor message, String fullName) {
    if (message.getFullName().equals(fullName)) {
      return message;
    }
    for (Descriptor nested : message.getNestedTypes()) {
      Descriptor found = find(nested, fullName);
      if (found != null) {
        return found;
      }
    }
    return null;
  }
}
