package ssegate.avrogen;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.math.RoundingMode;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.Predicate;

import org.apache.avro.Conversions;
import org.apache.avro.LogicalType;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.avro.data.TimeConversions;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericFixed;
import org.apache.avro.generic.IndexedRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;

/**
 * Writes the Avro fixtures of the gateway's schema package.
 *
 * <p>For each case it writes NAME.avsc (the writer schema), NAME.bin (the Avro binary encoding of
 * one datum, written by GenericDatumWriter with a BinaryEncoder: no wire-format header, no container
 * file) and NAME.json (the rendering the gateway must produce, computed by {@link Json} below from
 * the datum, not by Avro's JSON encoder). cases.txt lists the case names, one a line.
 *
 * <p>Usage: Gen OUTPUT_DIR
 */
public final class Gen {

  private static final String NS = "ssegate.test";

  private static final Conversions.DecimalConversion DECIMAL = new Conversions.DecimalConversion();
  private static final Conversions.UUIDConversion UUIDS = new Conversions.UUIDConversion();
  private static final TimeConversions.DateConversion DATE = new TimeConversions.DateConversion();
  private static final TimeConversions.TimeMillisConversion TIME_MILLIS =
      new TimeConversions.TimeMillisConversion();
  private static final TimeConversions.TimeMicrosConversion TIME_MICROS =
      new TimeConversions.TimeMicrosConversion();
  private static final TimeConversions.TimestampMillisConversion TS_MILLIS =
      new TimeConversions.TimestampMillisConversion();
  private static final TimeConversions.TimestampMicrosConversion TS_MICROS =
      new TimeConversions.TimestampMicrosConversion();
  private static final TimeConversions.TimestampNanosConversion TS_NANOS =
      new TimeConversions.TimestampNanosConversion();
  private static final TimeConversions.LocalTimestampMillisConversion LTS_MILLIS =
      new TimeConversions.LocalTimestampMillisConversion();
  private static final TimeConversions.LocalTimestampMicrosConversion LTS_MICROS =
      new TimeConversions.LocalTimestampMicrosConversion();
  private static final TimeConversions.LocalTimestampNanosConversion LTS_NANOS =
      new TimeConversions.LocalTimestampNanosConversion();

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
    g.all();
    g.finish();
  }

  // ---------------------------------------------------------------------------------------------
  // Output

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

    ByteArrayOutputStream bos = new ByteArrayOutputStream();
    BinaryEncoder enc = EncoderFactory.get().binaryEncoder(bos, null);
    new GenericDatumWriter<Object>(schema).write(datum, enc);
    enc.flush();
    byte[] bin = bos.toByteArray();

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
    String again = Json.render(schema, back);
    if (!again.equals(json)) {
      throw new IllegalStateException(name + ": read back as " + again + ", wrote " + json);
    }

    Files.write(out.resolve(name + ".avsc"),
        (schema.toString(true) + "\n").getBytes(StandardCharsets.UTF_8));
    Files.write(out.resolve(name + ".bin"), bin);
    Files.write(out.resolve(name + ".json"), (json + "\n").getBytes(StandardCharsets.UTF_8));
    cases.add(name);
  }

  // ---------------------------------------------------------------------------------------------
  // Helpers to build datums

  private static Schema parse(String json) {
    return new Schema.Parser().parse(json);
  }

  /** A record of schema s from name/value pairs; every field must be given. */
  private static GenericData.Record rec(Schema s, Object... kv) {
    if (kv.length != 2 * s.getFields().size()) {
      throw new IllegalArgumentException(s.getName() + ": give every field");
    }
    GenericData.Record r = new GenericData.Record(s);
    for (int i = 0; i < kv.length; i += 2) {
      String f = (String) kv[i];
      if (s.getField(f) == null) {
        throw new IllegalArgumentException(s.getName() + ": no field " + f);
      }
      r.put(f, kv[i + 1]);
    }
    return r;
  }

  /** The schema of field f of record schema s, with a union's non-null branch taken if asked. */
  private static Schema field(Schema s, String f) {
    return s.getField(f).schema();
  }

  private static Schema nonNull(Schema union) {
    for (Schema b : union.getTypes()) {
      if (b.getType() != Schema.Type.NULL) {
        return b;
      }
    }
    throw new IllegalArgumentException("no non-null branch");
  }

  private static Schema named(Schema root, String fullName) {
    Schema found = find(root, fullName, new ArrayList<>());
    if (found == null) {
      throw new IllegalArgumentException("no type " + fullName);
    }
    return found;
  }

  private static Schema find(Schema s, String fullName, List<Schema> seen) {
    for (Schema x : seen) {
      if (x == s) {
        return null;
      }
    }
    seen.add(s);
    switch (s.getType()) {
      case RECORD:
        if (s.getFullName().equals(fullName)) {
          return s;
        }
        for (Schema.Field f : s.getFields()) {
          Schema r = find(f.schema(), fullName, seen);
          if (r != null) {
            return r;
          }
        }
        return null;
      case ENUM:
      case FIXED:
        return s.getFullName().equals(fullName) ? s : null;
      case ARRAY:
        return find(s.getElementType(), fullName, seen);
      case MAP:
        return find(s.getValueType(), fullName, seen);
      case UNION:
        for (Schema b : s.getTypes()) {
          Schema r = find(b, fullName, seen);
          if (r != null) {
            return r;
          }
        }
        return null;
      default:
        return null;
    }
  }

  private static ByteBuffer bytes(int... b) {
    byte[] a = new byte[b.length];
    for (int i = 0; i < b.length; i++) {
      a[i] = (byte) b[i];
    }
    return ByteBuffer.wrap(a);
  }

  private static ByteBuffer utf8(String s) {
    return ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8));
  }

  private static GenericData.Fixed fixed(Schema s, int... b) {
    if (b.length != s.getFixedSize()) {
      throw new IllegalArgumentException(s.getName() + ": size " + s.getFixedSize());
    }
    return new GenericData.Fixed(s, bytes(b).array());
  }

  private static GenericData.EnumSymbol sym(Schema s, String symbol) {
    if (!s.hasEnumSymbol(symbol)) {
      throw new IllegalArgumentException(s.getName() + ": no symbol " + symbol);
    }
    return new GenericData.EnumSymbol(s, symbol);
  }

  @SafeVarargs
  private static <T> List<T> list(T... items) {
    return new ArrayList<>(Arrays.asList(items));
  }

  /** An insertion-ordered map from key/value pairs. */
  private static Map<String, Object> map(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }

  private static ByteBuffer decBytes(Schema s, String v) {
    return DECIMAL.toBytes(new BigDecimal(v), s, s.getLogicalType());
  }

  private static GenericFixed decFixed(Schema s, String v) {
    return DECIMAL.toFixed(new BigDecimal(v), s, s.getLogicalType());
  }

  private static CharSequence uuid(Schema s, String v) {
    return UUIDS.toCharSequence(UUID.fromString(v), s, s.getLogicalType());
  }

  private static int date(Schema s, String v) {
    return DATE.toInt(LocalDate.parse(v), s, s.getLogicalType());
  }

  // ---------------------------------------------------------------------------------------------
  // The cases

  private void all() throws IOException {
    topLevel();
    primitives();
    primitiveArrays();
    nested();
    enums();
    arrays();
    maps();
    fixeds();
    unions();
    decimals();
    uuids();
    dates();
    times();
    timestamps();
    recursive();
    namedRefs();
    orderEvent();
  }

  private void topLevel() throws IOException {
    emit("top-null", parse("\"null\""), null);
    emit("top-boolean", parse("\"boolean\""), true);
    emit("top-int", parse("\"int\""), -300);
    emit("top-long", parse("\"long\""), Long.MIN_VALUE);
    emit("top-float", parse("\"float\""), 0.1f);
    emit("top-double", parse("\"double\""), Double.NaN);
    emit("top-bytes", parse("\"bytes\""), bytes(0xc3, 0x28, 0x00, 0xff));
    emit("top-string", parse("\"string\""), "h\u00e9llo \"w\u00f6rld\"\n");
    Schema e = parse("{\"type\":\"enum\",\"name\":\"Color\",\"namespace\":\"" + NS
        + "\",\"symbols\":[\"RED\",\"GREEN\",\"BLUE\"]}");
    emit("top-enum", e, sym(e, "BLUE"));
    Schema u = parse("[\"null\",\"string\"]");
    emit("top-union-1", u, null);
    emit("top-union-2", u, "only the branch value");
  }

  private void primitives() throws IOException {
    Schema s = parse("""
        {"type": "record", "name": "Primitives", "namespace": "ssegate.test", "fields": [
          {"name": "n", "type": "null"},
          {"name": "flag", "type": "boolean"},
          {"name": "i", "type": "int"},
          {"name": "l", "type": "long"},
          {"name": "f", "type": "float"},
          {"name": "d", "type": "double"},
          {"name": "raw", "type": "bytes"},
          {"name": "s", "type": "string"}
        ]}""");
    emit("primitives-1", s, rec(s, "n", null, "flag", false, "i", 42, "l", 1234567890123L,
        "f", 1.5f, "d", 3.141592653589793, "raw", utf8("hello"), "s", "hello"));
    emit("primitives-2", s, rec(s, "n", null, "flag", true, "i", Integer.MIN_VALUE,
        "l", Long.MAX_VALUE, "f", Float.MAX_VALUE, "d", Double.MAX_VALUE, "raw", bytes(),
        "s", ""));
    emit("primitives-3", s, rec(s, "n", null, "flag", true, "i", Integer.MAX_VALUE,
        "l", Long.MIN_VALUE, "f", -0.0f, "d", -0.0, "raw", bytes(0xff, 0xfe, 0x00, 0x80),
        "s", "caf\u00e9 \u00fc\u00df \u4e2d\u6587 \ud83d\ude00 \"q\" \\ \n\r\t\u0001"));
    emit("primitives-4", s, rec(s, "n", null, "flag", false, "i", 0, "l", 0L,
        "f", Float.NaN, "d", Double.NEGATIVE_INFINITY, "raw", bytes(0), "s", " "));
    emit("primitives-5", s, rec(s, "n", null, "flag", false, "i", -1, "l", -1L,
        "f", Float.POSITIVE_INFINITY, "d", 1e21, "raw", bytes(0xfb, 0xff), "s", "1e-7"));
  }

  private void primitiveArrays() throws IOException {
    Schema ints = parse("{\"type\":\"array\",\"items\":\"int\"}");
    emit("ints", ints, list(0, 1, -1, 63, -64, 64, -65, 127, 128, 8191, 8192, -8193, 1 << 20,
        Integer.MAX_VALUE, Integer.MIN_VALUE, Integer.MIN_VALUE + 1));

    Schema longs = parse("{\"type\":\"array\",\"items\":\"long\"}");
    emit("longs", longs, list(0L, 1L, -1L, 2147483647L, 2147483648L, -2147483648L,
        -2147483649L, 1L << 53, (1L << 53) + 1, -(1L << 53) - 1, 1L << 62, Long.MAX_VALUE,
        Long.MAX_VALUE - 1, Long.MIN_VALUE, Long.MIN_VALUE + 1));

    Schema floats = parse("{\"type\":\"array\",\"items\":\"float\"}");
    emit("floats", floats, list(0.0f, -0.0f, 1.0f, -1.0f, 3.0f, 2.5f, -7.25f, 0.1f,
        1.0f / 3.0f, 123.456f, 16777216.0f, 1e10f, 1e20f, 1e21f, 1e-6f, 1e-7f, 1.5e-5f,
        Float.MAX_VALUE, -Float.MAX_VALUE, Float.MIN_VALUE, Float.MIN_NORMAL, 3.4e38f,
        Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY));

    Schema doubles = parse("{\"type\":\"array\",\"items\":\"double\"}");
    emit("doubles", doubles, list(0.0, -0.0, 1.0, -1.0, 3.0, -2.5, 0.1, 0.1 + 0.2,
        1.0 / 3.0, 123.456, -123.456e-10, Math.PI, Math.E, 1e-7, 1e-6, 1.5e-6, 0.000123,
        1e20, 1e21, 1.5e21, 999999999999999900000.0, 9007199254740992.0,
        1152921504606846976.0, 2.82879384806159E17, 1e300, -1e-300, 5e-324,
        Double.MIN_NORMAL, Double.MAX_VALUE, -Double.MAX_VALUE, 4.35, 100.0, 1e16,
        Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY));

    Schema strings = parse("{\"type\":\"array\",\"items\":\"string\"}");
    emit("strings", strings, list(
        "",
        "plain ascii",
        "quote \" backslash \\ slash /",
        "line1\nline2\r\nline3\r",
        "tab\there",
        "\0\u0001\b\u000b\f\u001b\u001f",
        "del \u007f and nel \u0085",
        "<html> & 'apos'",
        "caf\u00e9 \u00fc\u00df \u4e2d\u6587 \u65e5\u672c\u8a9e \u0627\u0644\u0639\u0631\u0628\u064a\u0629",
        "emoji \ud83d\ude00 \ud83d\ude80 \ud834\udd1e",
        "separators \u2028 and \u2029",
        "replacement \ufffd bom \ufeff",
        "{\"not\":\"json\"}"));

    Schema bytesArr = parse("{\"type\":\"array\",\"items\":\"bytes\"}");
    emit("bytes-array", bytesArr, list(bytes(), bytes(0), bytes(0xff), bytes(0xff, 0xfe),
        bytes(0xff, 0xfe, 0xfd), bytes(0xc3, 0x28), bytes(0x80, 0x81, 0x82, 0x83),
        utf8("hello, world"), utf8("\u00e9")));
  }

  private void nested() throws IOException {
    Schema s = parse("""
        {"type": "record", "name": "Outer", "namespace": "ssegate.test", "fields": [
          {"name": "id", "type": "string"},
          {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [
            {"name": "a", "type": "int"},
            {"name": "deeper", "type": {"type": "record", "name": "Deepest", "fields": [
              {"name": "flag", "type": "boolean"},
              {"name": "label", "type": "string"}
            ]}}
          ]}},
          {"name": "tail", "type": "long"}
        ]}""");
    Schema inner = field(s, "inner");
    Schema deepest = field(inner, "deeper");
    emit("nested", s, rec(s, "id", "outer-1",
        "inner", rec(inner, "a", 7, "deeper", rec(deepest, "flag", true, "label", "deep")),
        "tail", -99L));
  }

  private void enums() throws IOException {
    Schema s = parse("""
        {"type": "record", "name": "Shipment", "namespace": "ssegate.test", "fields": [
          {"name": "status", "type": {"type": "enum", "name": "Status",
            "symbols": ["PENDING", "SHIPPED", "DELIVERED", "CANCELLED"]}},
          {"name": "history", "type": {"type": "array", "items": "Status"}}
        ]}""");
    Schema st = field(s, "status");
    emit("enum-1", s, rec(s, "status", sym(st, "PENDING"), "history", list()));
    emit("enum-2", s, rec(s, "status", sym(st, "CANCELLED"),
        "history", list(sym(st, "PENDING"), sym(st, "SHIPPED"), sym(st, "DELIVERED"))));
  }

  private void arrays() throws IOException {
    Schema s = parse("""
        {"type": "record", "name": "Lists", "namespace": "ssegate.test", "fields": [
          {"name": "ints", "type": {"type": "array", "items": "int"}},
          {"name": "names", "type": {"type": "array", "items": "string"}},
          {"name": "points", "type": {"type": "array", "items": {"type": "record",
            "name": "Point", "fields": [
              {"name": "x", "type": "double"},
              {"name": "y", "type": "double"}
            ]}}},
          {"name": "matrix", "type": {"type": "array", "items": {"type": "array",
            "items": "long"}}},
          {"name": "maybe", "type": {"type": "array", "items": ["null", "string"]}}
        ]}""");
    Schema point = field(s, "points").getElementType();
    emit("arrays-1", s, rec(s, "ints", list(), "names", list(), "points", list(),
        "matrix", list(), "maybe", list()));
    emit("arrays-2", s, rec(s,
        "ints", list(1, 2, 3, -4, 500),
        "names", list("alpha", "b\u00eata", "gamma"),
        "points", list(rec(point, "x", 0.5, "y", -1.25), rec(point, "x", 3.0, "y", 4.0)),
        "matrix", list(list(1L, 2L), list(), list(-3L)),
        "maybe", list("x", null, "z")));
  }

  private void maps() throws IOException {
    Schema s = parse("""
        {"type": "record", "name": "Maps", "namespace": "ssegate.test", "fields": [
          {"name": "counts", "type": {"type": "map", "values": "long"}},
          {"name": "labels", "type": {"type": "map", "values": "string"}},
          {"name": "points", "type": {"type": "map", "values": {"type": "record",
            "name": "Point", "fields": [
              {"name": "x", "type": "int"},
              {"name": "y", "type": "int"}
            ]}}},
          {"name": "optional", "type": {"type": "map", "values": ["null", "int"]}},
          {"name": "lists", "type": {"type": "map", "values": {"type": "array",
            "items": "string"}}}
        ]}""");
    Schema point = field(s, "points").getValueType();
    emit("maps-1", s, rec(s, "counts", map(), "labels", map(), "points", map(),
        "optional", map(), "lists", map()));
    emit("maps-2", s, rec(s,
        "counts", map("zeta", 26L, "alpha", 1L, "mid", -13L, "", 0L),
        "labels", map("quote\"key", "v1", "back\\slash", "v2", "new\nline", "v3",
            "\u00fcnic\u00f6de \ud83d\ude00", "v4"),
        "points", map("origin", rec(point, "x", 0, "y", 0), "far", rec(point, "x", -100, "y", 250)),
        "optional", map("set", 5, "unset", null),
        "lists", map("empty", list(), "two", list("a", "b"))));
  }

  private void fixeds() throws IOException {
    Schema s = parse("""
        {"type": "record", "name": "Digests", "namespace": "ssegate.test", "fields": [
          {"name": "md5", "type": {"type": "fixed", "name": "MD5", "size": 16}},
          {"name": "one", "type": {"type": "fixed", "name": "One", "size": 1}},
          {"name": "pair", "type": {"type": "fixed", "name": "Pair", "size": 2}},
          {"name": "again", "type": "MD5"}
        ]}""");
    Schema md5 = field(s, "md5");
    emit("fixed", s, rec(s,
        "md5", fixed(md5, 0xd4, 0x1d, 0x8c, 0xd9, 0x8f, 0x00, 0xb2, 0x04,
            0xe9, 0x80, 0x09, 0x98, 0xec, 0xf8, 0x42, 0x7e),
        "one", fixed(field(s, "one"), 0xff),
        "pair", fixed(field(s, "pair"), 0x00, 0x80),
        "again", fixed(md5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)));
  }

  private void unions() throws IOException {
    Schema opt = parse("""
        {"type": "record", "name": "Optional", "namespace": "ssegate.test", "fields": [
          {"name": "note", "type": ["null", "string"]}
        ]}""");
    emit("union-null-string-1", opt, rec(opt, "note", null));
    emit("union-null-string-2", opt, rec(opt, "note", "some text"));

    Schema three = parse("""
        {"type": "record", "name": "Multi", "namespace": "ssegate.test", "fields": [
          {"name": "v", "type": ["null", "long", "string"]}
        ]}""");
    emit("union-three-1", three, rec(three, "v", null));
    emit("union-three-2", three, rec(three, "v", -4200000000L));
    emit("union-three-3", three, rec(three, "v", "forty-two"));

    Schema recs = parse("""
        {"type": "record", "name": "Interaction", "namespace": "ssegate.test", "fields": [
          {"name": "at", "type": "long"},
          {"name": "payload", "type": [
            {"type": "record", "name": "Click", "fields": [
              {"name": "x", "type": "int"},
              {"name": "y", "type": "int"}
            ]},
            {"type": "record", "name": "Purchase", "fields": [
              {"name": "sku", "type": "string"},
              {"name": "amount", "type": "double"}
            ]}
          ]}
        ]}""");
    Schema click = named(recs, NS + ".Click");
    Schema purchase = named(recs, NS + ".Purchase");
    emit("union-records-1", recs, rec(recs, "at", 1L, "payload", rec(click, "x", 10, "y", 20)));
    emit("union-records-2", recs, rec(recs, "at", 2L,
        "payload", rec(purchase, "sku", "SKU-1", "amount", 19.99)));
  }

  private void decimals() throws IOException {
    Schema b = parse("""
        {"type": "record", "name": "Price", "namespace": "ssegate.test", "fields": [
          {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
            "precision": 10, "scale": 2}}
        ]}""");
    Schema amt = field(b, "amount");
    String[] vb = {"12.30", "-0.05", "0.00", "99999999.99", "-12345678.90", "1.00"};
    for (int i = 0; i < vb.length; i++) {
      emit("decimal-bytes-" + (i + 1), b, rec(b, "amount", decBytes(amt, vb[i])));
    }

    Schema f = parse("""
        {"type": "record", "name": "Measure", "namespace": "ssegate.test", "fields": [
          {"name": "value", "type": {"type": "fixed", "name": "Dec8", "size": 8,
            "logicalType": "decimal", "precision": 18, "scale": 4}}
        ]}""");
    Schema val = field(f, "value");
    String[] vf = {"3.1416", "-0.0001", "0.0000", "12345678901234.5678", "-99999999999999.9999"};
    for (int i = 0; i < vf.length; i++) {
      emit("decimal-fixed-" + (i + 1), f, rec(f, "value", decFixed(val, vf[i])));
    }

    Schema z = parse("""
        {"type": "record", "name": "Count", "namespace": "ssegate.test", "fields": [
          {"name": "n", "type": {"type": "bytes", "logicalType": "decimal",
            "precision": 20, "scale": 0}}
        ]}""");
    emit("decimal-scale0", z, rec(z, "n", decBytes(field(z, "n"), "-12345678901234567890")));
  }

  private void uuids() throws IOException {
    Schema s = parse("""
        {"type": "record", "name": "Identified", "namespace": "ssegate.test", "fields": [
          {"name": "id", "type": {"type": "string", "logicalType": "uuid"}}
        ]}""");
    emit("uuid", s, rec(s, "id", uuid(field(s, "id"), "123e4567-e89b-12d3-a456-426614174000")));
  }

  private void dates() throws IOException {
    Schema s = parse("""
        {"type": "record", "name": "Dated", "namespace": "ssegate.test", "fields": [
          {"name": "day", "type": {"type": "int", "logicalType": "date"}}
        ]}""");
    Schema d = field(s, "day");
    String[] v = {"2026-12-04", "1970-01-01", "1969-12-31", "1900-02-28", "2000-02-29",
        "0001-01-01"};
    for (int i = 0; i < v.length; i++) {
      emit("date-" + (i + 1), s, rec(s, "day", date(d, v[i])));
    }
  }

  private void times() throws IOException {
    Schema s = parse("""
        {"type": "record", "name": "Clock", "namespace": "ssegate.test", "fields": [
          {"name": "ms", "type": {"type": "int", "logicalType": "time-millis"}},
          {"name": "us", "type": {"type": "long", "logicalType": "time-micros"}}
        ]}""");
    Schema ms = field(s, "ms");
    Schema us = field(s, "us");
    String[] v = {"17:30:00.123456", "00:00", "23:59:59.999999", "09:05:03.000007"};
    for (int i = 0; i < v.length; i++) {
      LocalTime t = LocalTime.parse(v[i]);
      emit("time-" + (i + 1), s, rec(s,
          "ms", TIME_MILLIS.toInt(t, ms, ms.getLogicalType()),
          "us", TIME_MICROS.toLong(t, us, us.getLogicalType())));
    }
  }

  private void timestamps() throws IOException {
    Schema s = parse("""
        {"type": "record", "name": "Stamps", "namespace": "ssegate.test", "fields": [
          {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
          {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
          {"name": "ns", "type": {"type": "long", "logicalType": "timestamp-nanos"}},
          {"name": "local_ms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
          {"name": "local_us", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
          {"name": "local_ns", "type": {"type": "long", "logicalType": "local-timestamp-nanos"}}
        ]}""");
    String[] v = {"2026-12-04T17:30:00.123456789Z", "1970-01-01T00:00:00Z",
        "1969-12-31T23:59:59.999999999Z", "1969-07-20T20:17:40.5Z", "1900-01-01T00:00:00.000001Z",
        "2262-04-11T23:47:16.854775807Z"};
    for (int i = 0; i < v.length; i++) {
      Instant t = Instant.parse(v[i]);
      LocalDateTime l = LocalDateTime.ofInstant(t, ZoneOffset.UTC);
      emit("timestamp-" + (i + 1), s, rec(s,
          "ms", TS_MILLIS.toLong(t, field(s, "ms"), field(s, "ms").getLogicalType()),
          "us", TS_MICROS.toLong(t, field(s, "us"), field(s, "us").getLogicalType()),
          "ns", TS_NANOS.toLong(t, field(s, "ns"), field(s, "ns").getLogicalType()),
          "local_ms", LTS_MILLIS.toLong(l, field(s, "local_ms"),
              field(s, "local_ms").getLogicalType()),
          "local_us", LTS_MICROS.toLong(l, field(s, "local_us"),
              field(s, "local_us").getLogicalType()),
          "local_ns", LTS_NANOS.toLong(l, field(s, "local_ns"),
              field(s, "local_ns").getLogicalType())));
    }
  }

  private void recursive() throws IOException {
    Schema s = parse("""
        {"type": "record", "name": "Node", "namespace": "ssegate.test", "fields": [
          {"name": "value", "type": "int"},
          {"name": "next", "type": ["null", "Node"]}
        ]}""");
    emit("linked-list-1", s, rec(s, "value", 1, "next", null));
    emit("linked-list-2", s, rec(s, "value", 1, "next",
        rec(s, "value", 2, "next", rec(s, "value", 3, "next", null))));
  }

  private void namedRefs() throws IOException {
    Schema s = parse("""
        {"type": "record", "name": "Person", "namespace": "ssegate.test", "fields": [
          {"name": "name", "type": "string"},
          {"name": "home", "type": {"type": "record", "name": "Address", "fields": [
            {"name": "street", "type": "string"},
            {"name": "city", "type": "string"},
            {"name": "country", "type": {"type": "enum", "name": "Country",
              "symbols": ["DE", "FR", "US"]}}
          ]}},
          {"name": "work", "type": ["null", "Address"]},
          {"name": "previous", "type": {"type": "array", "items": "ssegate.test.Address"}},
          {"name": "nationality", "type": "Country"}
        ]}""");
    Schema addr = field(s, "home");
    Schema country = field(addr, "country");
    emit("named-ref", s, rec(s,
        "name", "Ada",
        "home", rec(addr, "street", "1 Main St", "city", "Berlin", "country", sym(country, "DE")),
        "work", rec(addr, "street", "2 Rue X", "city", "Paris", "country", sym(country, "FR")),
        "previous", list(
            rec(addr, "street", "3 Elm", "city", "Boston", "country", sym(country, "US"))),
        "nationality", sym(country, "DE")));
  }

  private void orderEvent() throws IOException {
    Schema s = parse("""
        {"type": "record", "name": "OrderEvent", "namespace": "ssegate.test.orders",
         "doc": "An order changed state.", "fields": [
          {"name": "order_id", "type": {"type": "string", "logicalType": "uuid"}},
          {"name": "customer_id", "type": "long"},
          {"name": "status", "type": {"type": "enum", "name": "OrderStatus",
            "symbols": ["CREATED", "PAID", "SHIPPED", "DELIVERED", "CANCELLED"]}},
          {"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
          {"name": "updated_at", "type": ["null",
            {"type": "long", "logicalType": "timestamp-micros"}]},
          {"name": "currency", "type": "string"},
          {"name": "total", "type": {"type": "bytes", "logicalType": "decimal",
            "precision": 12, "scale": 2}},
          {"name": "items", "type": {"type": "array", "items": {"type": "record",
            "name": "LineItem", "fields": [
              {"name": "sku", "type": "string"},
              {"name": "quantity", "type": "int"},
              {"name": "unit_price", "type": {"type": "bytes", "logicalType": "decimal",
                "precision": 10, "scale": 2}},
              {"name": "discount", "type": ["null", "double"]}
            ]}}},
          {"name": "shipping_address", "type": {"type": "record", "name": "Address",
            "fields": [
              {"name": "line1", "type": "string"},
              {"name": "line2", "type": ["null", "string"]},
              {"name": "city", "type": "string"},
              {"name": "postal_code", "type": "string"},
              {"name": "country", "type": "string"}
            ]}},
          {"name": "tags", "type": {"type": "map", "values": "string"}},
          {"name": "express", "type": "boolean"},
          {"name": "weight_kg", "type": "float"},
          {"name": "delivery_date", "type": ["null", {"type": "int", "logicalType": "date"}]},
          {"name": "notes", "type": ["null", "string"]}
        ]}""");
    Schema oid = field(s, "order_id");
    Schema status = field(s, "status");
    Schema created = field(s, "created_at");
    Schema updated = nonNull(field(s, "updated_at"));
    Schema total = field(s, "total");
    Schema item = field(s, "items").getElementType();
    Schema price = field(item, "unit_price");
    Schema address = field(s, "shipping_address");
    Schema delivery = nonNull(field(s, "delivery_date"));

    Instant c1 = Instant.parse("2026-12-04T17:30:00.123Z");
    emit("order-event-1", s, rec(s,
        "order_id", uuid(oid, "8f14e45f-ceea-467f-a0e6-3b5e9f1a2c7d"),
        "customer_id", 1048576001L,
        "status", sym(status, "PAID"),
        "created_at", TS_MILLIS.toLong(c1, created, created.getLogicalType()),
        "updated_at", TS_MICROS.toLong(Instant.parse("2026-12-04T17:31:02.654321Z"), updated,
            updated.getLogicalType()),
        "currency", "EUR",
        "total", decBytes(total, "149.97"),
        "items", list(
            rec(item, "sku", "BK-1001", "quantity", 2, "unit_price", decBytes(price, "39.99"),
                "discount", null),
            rec(item, "sku", "MUG-0042", "quantity", 1, "unit_price", decBytes(price, "12.50"),
                "discount", 0.1),
            rec(item, "sku", "TEE-L-BLU", "quantity", 3, "unit_price", decBytes(price, "19.83"),
                "discount", null)),
        "shipping_address", rec(address, "line1", "Hauptstra\u00dfe 5", "line2", "2. OG",
            "city", "M\u00fcnchen", "postal_code", "80331", "country", "DE"),
        "tags", map("channel", "web", "campaign", "winter-sale", "priority", "normal"),
        "express", true,
        "weight_kg", 2.35f,
        "delivery_date", date(delivery, "2026-12-08"),
        "notes", "Leave at the door, ring \"twice\"."));
    emit("order-event-2", s, rec(s,
        "order_id", uuid(oid, "00000000-0000-4000-8000-000000000001"),
        "customer_id", 7L,
        "status", sym(status, "CREATED"),
        "created_at", TS_MILLIS.toLong(Instant.parse("2026-01-01T00:00:00Z"), created,
            created.getLogicalType()),
        "updated_at", null,
        "currency", "USD",
        "total", decBytes(total, "0.00"),
        "items", list(),
        "shipping_address", rec(address, "line1", "1 Infinite Loop", "line2", null,
            "city", "Cupertino", "postal_code", "95014", "country", "US"),
        "tags", map(),
        "express", false,
        "weight_kg", 0.0f,
        "delivery_date", null,
        "notes", null));
  }

  // ---------------------------------------------------------------------------------------------
  // The rendering (Avro datum -> JSON) the gateway must reproduce.

  static final class Json {
    private Json() {}

    static String render(Schema s, Object v) {
      StringBuilder sb = new StringBuilder();
      write(sb, s, v);
      return sb.toString();
    }

    private static void write(StringBuilder sb, Schema s, Object v) {
      LogicalType lt = s.getLogicalType();
      if (lt != null) {
        writeLogical(sb, s, lt, v);
        return;
      }
      switch (s.getType()) {
        case NULL:
          if (v != null) {
            throw new IllegalArgumentException("null expected");
          }
          sb.append("null");
          break;
        case BOOLEAN:
          sb.append(((Boolean) v) ? "true" : "false");
          break;
        case INT:
          sb.append(Integer.toString((Integer) v));
          break;
        case LONG:
          sb.append(Long.toString((Long) v));
          break;
        case FLOAT:
          sb.append(Num.formatFloat((Float) v));
          break;
        case DOUBLE:
          sb.append(Num.formatDouble((Double) v));
          break;
        case BYTES:
          quote(sb, Base64.getEncoder().encodeToString(bytesOf(v)));
          break;
        case FIXED:
          quote(sb, Base64.getEncoder().encodeToString(bytesOf(v)));
          break;
        case STRING:
          quote(sb, v.toString());
          break;
        case ENUM:
          if (!s.hasEnumSymbol(v.toString())) {
            throw new IllegalArgumentException("unknown symbol " + v);
          }
          quote(sb, v.toString());
          break;
        case ARRAY: {
          sb.append('[');
          boolean first = true;
          for (Object item : (Collection<?>) v) {
            if (!first) {
              sb.append(',');
            }
            first = false;
            write(sb, s.getElementType(), item);
          }
          sb.append(']');
          break;
        }
        case MAP: {
          sb.append('{');
          boolean first = true;
          for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
            if (!first) {
              sb.append(',');
            }
            first = false;
            quote(sb, e.getKey().toString());
            sb.append(':');
            write(sb, s.getValueType(), e.getValue());
          }
          sb.append('}');
          break;
        }
        case RECORD: {
          IndexedRecord r = (IndexedRecord) v;
          sb.append('{');
          boolean first = true;
          for (Schema.Field f : s.getFields()) {
            if (!first) {
              sb.append(',');
            }
            first = false;
            quote(sb, f.name());
            sb.append(':');
            write(sb, f.schema(), r.get(f.pos()));
          }
          sb.append('}');
          break;
        }
        case UNION: {
          int branch = GenericData.get().resolveUnion(s, v);
          write(sb, s.getTypes().get(branch), v);
          break;
        }
        default:
          throw new IllegalArgumentException("unexpected type " + s.getType());
      }
    }

    private static byte[] bytesOf(Object v) {
      if (v instanceof ByteBuffer) {
        ByteBuffer b = ((ByteBuffer) v).duplicate();
        byte[] a = new byte[b.remaining()];
        b.get(a);
        return a;
      }
      if (v instanceof GenericFixed) {
        return ((GenericFixed) v).bytes().clone();
      }
      throw new IllegalArgumentException("bytes expected, got " + v.getClass());
    }

    private static void writeLogical(StringBuilder sb, Schema s, LogicalType lt, Object v) {
      switch (lt.getName()) {
        case "decimal": {
          int scale = ((LogicalTypes.Decimal) lt).getScale();
          BigDecimal d = new BigDecimal(new BigInteger(bytesOf(v)), scale);
          quote(sb, d.toPlainString());
          break;
        }
        case "uuid":
          quote(sb, v.toString());
          break;
        case "date": {
          LocalDate d = LocalDate.ofEpochDay((Integer) v);
          quote(sb, ymd(d.getYear(), d.getMonthValue(), d.getDayOfMonth()));
          break;
        }
        case "time-millis":
          quote(sb, clock((Integer) v, 1_000L, 3));
          break;
        case "time-micros":
          quote(sb, clock((Long) v, 1_000_000L, 6));
          break;
        case "timestamp-millis":
          quote(sb, stamp((Long) v, 1_000L, 3, true));
          break;
        case "timestamp-micros":
          quote(sb, stamp((Long) v, 1_000_000L, 6, true));
          break;
        case "timestamp-nanos":
          quote(sb, stamp((Long) v, 1_000_000_000L, 9, true));
          break;
        case "local-timestamp-millis":
          quote(sb, stamp((Long) v, 1_000L, 3, false));
          break;
        case "local-timestamp-micros":
          quote(sb, stamp((Long) v, 1_000_000L, 6, false));
          break;
        case "local-timestamp-nanos":
          quote(sb, stamp((Long) v, 1_000_000_000L, 9, false));
          break;
        default:
          throw new IllegalArgumentException("unexpected logical type " + lt.getName());
      }
    }

    private static String ymd(int y, int m, int d) {
      if (y < 0 || y > 9999) {
        throw new IllegalArgumentException("year out of range: " + y);
      }
      return String.format("%04d-%02d-%02d", y, m, d);
    }

    private static String frac(long units, int digits) {
      String f = Long.toString(units);
      return "0".repeat(digits - f.length()) + f;
    }

    /** Time of day from units since midnight. */
    private static String clock(long v, long perSecond, int digits) {
      if (v < 0 || v >= 86_400L * perSecond) {
        throw new IllegalArgumentException("time of day out of range: " + v);
      }
      long secs = v / perSecond;
      return String.format("%02d:%02d:%02d", secs / 3600, secs / 60 % 60, secs % 60) + "."
          + frac(v % perSecond, digits);
    }

    /** A point in time from units since 1970-01-01T00:00:00 (UTC or local). */
    private static String stamp(long v, long perSecond, int digits, boolean zulu) {
      long secs = Math.floorDiv(v, perSecond);
      long part = Math.floorMod(v, perSecond);
      LocalDateTime t = LocalDateTime.ofEpochSecond(secs, 0, ZoneOffset.UTC);
      return ymd(t.getYear(), t.getMonthValue(), t.getDayOfMonth())
          + String.format("T%02d:%02d:%02d", t.getHour(), t.getMinute(), t.getSecond())
          + "." + frac(part, digits) + (zulu ? "Z" : "");
    }

    /** A JSON string: Go's encoding/json escaping without HTML escaping, as the mapping says. */
    static void quote(StringBuilder sb, String s) {
      try {
        StandardCharsets.UTF_8.newEncoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT)
            .encode(CharBuffer.wrap(s));
      } catch (CharacterCodingException e) {
        throw new IllegalArgumentException("not well-formed UTF-16: " + s, e);
      }
      sb.append('"');
      for (int i = 0; i < s.length(); i++) {
        char c = s.charAt(i);
        switch (c) {
          case '"':
            sb.append("\\\"");
            break;
          case '\\':
            sb.append("\\\\");
            break;
          case '\n':
            sb.append("\\n");
            break;
          case '\r':
            sb.append("\\r");
            break;
          case '\t':
            sb.append("\\t");
            break;
          case '\u2028':
            sb.append("\\u2028");
            break;
          case '\u2029':
            sb.append("\\u2029");
            break;
          default:
            if (c < 0x20) {
              sb.append(String.format("\\u%04x", (int) c));
            } else {
              sb.append(c);
            }
        }
      }
      sb.append('"');
    }
  }

  /** Numbers: shortest round-trip digits laid out as ECMAScript's Number::toString does. */
  static final class Num {
    private Num() {}

    static String formatDouble(double x) {
      if (Double.isNaN(x)) {
        return "\"NaN\"";
      }
      if (Double.isInfinite(x)) {
        return x > 0 ? "\"Infinity\"" : "\"-Infinity\"";
      }
      if (x == 0) {
        return Double.doubleToRawLongBits(x) < 0 ? "-0" : "0";
      }
      double a = Math.abs(x);
      BigDecimal d = shortest(new BigDecimal(a), 17, t -> Double.parseDouble(t) == a);
      return (x < 0 ? "-" : "") + layout(d);
    }

    static String formatFloat(float x) {
      if (Float.isNaN(x)) {
        return "\"NaN\"";
      }
      if (Float.isInfinite(x)) {
        return x > 0 ? "\"Infinity\"" : "\"-Infinity\"";
      }
      if (x == 0) {
        return Float.floatToRawIntBits(x) < 0 ? "-0" : "0";
      }
      float a = Math.abs(x);
      BigDecimal d = shortest(new BigDecimal((double) a), 9, t -> Float.parseFloat(t) == a);
      return (x < 0 ? "-" : "") + layout(d);
    }

    /**
     * The decimal with the fewest significant digits that reads back to the same value; among
     * those of that length, the one nearest the exact value.
     */
    private static BigDecimal shortest(BigDecimal exact, int maxDigits,
        Predicate<String> readsBack) {
      RoundingMode[] modes = {RoundingMode.HALF_EVEN, RoundingMode.FLOOR, RoundingMode.CEILING};
      for (int p = 1; p <= maxDigits; p++) {
        BigDecimal best = null;
        for (RoundingMode m : modes) {
          BigDecimal r = exact.round(new MathContext(p, m));
          if (!readsBack.test(r.toString())) {
            continue;
          }
          if (best == null
              || r.subtract(exact).abs().compareTo(best.subtract(exact).abs()) < 0) {
            best = r;
          }
        }
        if (best != null) {
          return best.stripTrailingZeros();
        }
      }
      throw new IllegalStateException("no round-trip form for " + exact);
    }

    /** ECMAScript Number::toString layout of a positive decimal with no trailing zeros. */
    private static String layout(BigDecimal d) {
      String digits = d.unscaledValue().toString();
      int k = digits.length();
      int n = k - d.scale(); // value = 0.digits * 10^n
      if (k <= n && n <= 21) {
        return digits + "0".repeat(n - k);
      }
      if (0 < n && n <= 21) {
        return digits.substring(0, n) + "." + digits.substring(n);
      }
      if (-6 < n && n <= 0) {
        return "0." + "0".repeat(-n) + digits;
      }
      int e = n - 1;
      String mant = k == 1 ? digits : digits.charAt(0) + "." + digits.substring(1);
      return mant + "e" + (e >= 0 ? "+" : "-") + Math.abs(e);
    }
  }
}
