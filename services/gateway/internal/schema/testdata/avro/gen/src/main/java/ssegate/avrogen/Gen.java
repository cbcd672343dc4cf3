package ssegate.avrogen;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;

/**
 * Writes the Avro fixtures of the gateway's schema package.
 *
 * <p>For each case it writes NAME.avsc (the writer schema), NAME.bin (the Avro binary encoding of
 * one datum, written by GenericDatumWriter with a BinaryEncoder: no wire-format header, no container
 * file) and NAME.json (the rendering the gateway must produce, computed by {@link Json} from the
 * datum, not by Avro's JSON encoder). cases.txt lists the case names, one a line.
 *
 * <p>The cases themselves are in {@link Cases}; this class writes them and reads them back.
 *
 * <p>Usage: Gen OUTPUT_DIR
 */
public final class Gen {

  private final Path out;
  private final List<String> cases = new ArrayList<>();

  private Gen(Path out) {
    this.out = out;
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: Gen OUTPUT_DIR");
      System.exit(2);
    }
    Gen g = new Gen(Paths.get(args[0]).toAbsolutePath().normalize());
    g.clean();
    new Cases(g::emit).all();
    g.finish();
  }

  /** Removes the fixtures of an earlier run (only the files directly in the output folder). */
  private void clean() throws IOException {
    Files.createDirectories(out);
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(out, "*.{avsc,bin,json}")) {
      for (Path p : ds) {
        Files.delete(p);
      }
    }
  }

  private void finish() throws IOException {
    StringBuilder sb = new StringBuilder();
    for (String c : cases) {
      sb.append(c).append('\n');
    }
    Files.write(out.resolve("cases.txt"), sb.toString().getBytes(StandardCharsets.UTF_8));
  }

  /** Writes one case, after checking that Avro reads the bytes back to the same rendering. */
  private void emit(String name, Schema schema, Object datum) throws IOException {
    if (cases.contains(name)) {
      throw new IllegalStateException("duplicate case " + name);
    }
    if (!GenericData.get().validate(schema, datum)) {
      throw new IllegalStateException(name + ": datum does not match its schema");
    }
    String json = Json.render(schema, datum);
    byte[] bin = write(schema, datum);

    String again = Json.render(schema, readBack(name, schema, bin));
    if (!again.equals(json)) {
      throw new IllegalStateException(name + ": read back as " + again + ", wrote " + json);
    }

    Files.write(out.resolve(name + ".avsc"),
        (schema.toString(true) + "\n").getBytes(StandardCharsets.UTF_8));
    Files.write(out.resolve(name + ".bin"), bin);
    Files.write(out.resolve(name + ".json"), (json + "\n").getBytes(StandardCharsets.UTF_8));
    cases.add(name);
  }

  /** The Avro binary encoding of one datum. */
  private static byte[] write(Schema schema, Object datum) throws IOException {
    ByteArrayOutputStream bos = new ByteArrayOutputStream();
    BinaryEncoder enc = EncoderFactory.get().binaryEncoder(bos, null);
    new GenericDatumWriter<Object>(schema).write(datum, enc);
    enc.flush();
    return bos.toByteArray();
  }

  /** Decodes bin with Avro; every byte must belong to the one datum. */
  private static Object readBack(String name, Schema schema, byte[] bin) throws IOException {
    BinaryDecoder dec = DecoderFactory.get().binaryDecoder(bin, null);
    // Read maps into insertion-ordered maps so that the entries keep the order they were written in.
    GenericData ordered = new GenericData() {
      @Override
      public Object newMap(Object old, int size) {
        return new LinkedHashMap<Object, Object>();
      }
    };
    GenericDatumReader<Object> reader = new GenericDatumReader<>(schema, schema, ordered);
    Object back = reader.read(null, dec);
    if (!dec.isEnd()) {
      throw new IllegalStateException(name + ": trailing bytes after the datum");
    }
    return back;
  }
}
