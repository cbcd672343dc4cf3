package ssegate.avrogen;

import static ssegate.avrogen.Datums.LTS_MICROS;
import static ssegate.avrogen.Datums.LTS_MILLIS;
import static ssegate.avrogen.Datums.LTS_NANOS;
import static ssegate.avrogen.Datums.TIME_MICROS;
import static ssegate.avrogen.Datums.TIME_MILLIS;
import static ssegate.avrogen.Datums.TS_MICROS;
import static ssegate.avrogen.Datums.TS_MILLIS;
import static ssegate.avrogen.Datums.TS_NANOS;
import static ssegate.avrogen.Datums.bytes;
import static ssegate.avrogen.Datums.date;
import static ssegate.avrogen.Datums.decBytes;
import static ssegate.avrogen.Datums.decFixed;
import static ssegate.avrogen.Datums.field;
import static ssegate.avrogen.Datums.fixed;
import static ssegate.avrogen.Datums.list;
import static ssegate.avrogen.Datums.map;
import static ssegate.avrogen.Datums.named;
import static ssegate.avrogen.Datums.nonNull;
import static ssegate.avrogen.Datums.parse;
import static ssegate.avrogen.Datums.rec;
import static ssegate.avrogen.Datums.sym;
import static ssegate.avrogen.Datums.utf8;
import static ssegate.avrogen.Datums.uuid;

import java.io.IOException;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneOffset;

import org.apache.avro.Schema;

/** The cases, in the order they are listed in cases.txt. */
final class Cases {

  /** Receives each case: its name, writer schema and datum. */
  @FunctionalInterface
  interface Sink {
    void emit(String name, Schema schema, Object datum) throws IOException;
  }

  private static final String NS = "ssegate.test";

  private final Sink sink;

  Cases(Sink sink) {
    this.sink = sink;
  }

  private void emit(String name, Schema schema, Object datum) throws IOException {
    sink.emit(name, schema, datum);
  }

  void all() throws IOException {
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
    Schema s = orderEventSchema();
    emit("order-event-1", s, orderEvent1(s));
    emit("order-event-2", s, orderEvent2(s));
  }

  /** A realistic, wide record, meant for benchmarks. */
  private static Schema orderEventSchema() {
    return parse("""
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
  }

  private static Object orderEvent1(Schema s) {
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
    return rec(s,
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
        "notes", "Leave at the door, ring \"twice\".");
  }

  private static Object orderEvent2(Schema s) {
    Schema oid = field(s, "order_id");
    Schema status = field(s, "status");
    Schema created = field(s, "created_at");
    Schema total = field(s, "total");
    Schema address = field(s, "shipping_address");

    return rec(s,
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
        "notes", null);
  }
}
