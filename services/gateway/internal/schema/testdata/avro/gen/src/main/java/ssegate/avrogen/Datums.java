package ssegate.avrogen;

import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;

import org.apache.avro.Conversions;
import org.apache.avro.Schema;
import org.apache.avro.data.TimeConversions;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericFixed;

/** Helpers to build the datums of the cases: schemas, records, values of logical types. */
final class Datums {

  static final Conversions.DecimalConversion DECIMAL = new Conversions.DecimalConversion();
  static final Conversions.UUIDConversion UUIDS = new Conversions.UUIDConversion();
  static final TimeConversions.DateConversion DATE = new TimeConversions.DateConversion();
  static final TimeConversions.TimeMillisConversion TIME_MILLIS =
      new TimeConversions.TimeMillisConversion();
  static final TimeConversions.TimeMicrosConversion TIME_MICROS =
      new TimeConversions.TimeMicrosConversion();
  static final TimeConversions.TimestampMillisConversion TS_MILLIS =
      new TimeConversions.TimestampMillisConversion();
  static final TimeConversions.TimestampMicrosConversion TS_MICROS =
      new TimeConversions.TimestampMicrosConversion();
  static final TimeConversions.TimestampNanosConversion TS_NANOS =
      new TimeConversions.TimestampNanosConversion();
  static final TimeConversions.LocalTimestampMillisConversion LTS_MILLIS =
      new TimeConversions.LocalTimestampMillisConversion();
  static final TimeConversions.LocalTimestampMicrosConversion LTS_MICROS =
      new TimeConversions.LocalTimestampMicrosConversion();
  static final TimeConversions.LocalTimestampNanosConversion LTS_NANOS =
      new TimeConversions.LocalTimestampNanosConversion();

  private Datums() {}

  static Schema parse(String json) {
    return new Schema.Parser().parse(json);
  }

  /** A record of schema s from name/value pairs; every field must be given. */
  static GenericData.Record rec(Schema s, Object... kv) {
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

  /** The schema of field f of record schema s. */
  static Schema field(Schema s, String f) {
    return s.getField(f).schema();
  }

  static Schema nonNull(Schema union) {
    for (Schema b : union.getTypes()) {
      if (b.getType() != Schema.Type.NULL) {
        return b;
      }
    }
    throw new IllegalArgumentException("no non-null branch");
  }

  static Schema named(Schema root, String fullName) {
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

  static ByteBuffer bytes(int... b) {
    byte[] a = new byte[b.length];
    for (int i = 0; i < b.length; i++) {
      a[i] = (byte) b[i];
    }
    return ByteBuffer.wrap(a);
  }

  static ByteBuffer utf8(String s) {
    return ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8));
  }

  static GenericData.Fixed fixed(Schema s, int... b) {
    if (b.length != s.getFixedSize()) {
      throw new IllegalArgumentException(s.getName() + ": size " + s.getFixedSize());
    }
    return new GenericData.Fixed(s, bytes(b).array());
  }

  static GenericData.EnumSymbol sym(Schema s, String symbol) {
    if (!s.hasEnumSymbol(symbol)) {
      throw new IllegalArgumentException(s.getName() + ": no symbol " + symbol);
    }
    return new GenericData.EnumSymbol(s, symbol);
  }

  @SafeVarargs
  static <T> List<T> list(T... items) {
    return new ArrayList<>(Arrays.asList(items));
  }

  /** An insertion-ordered map from key/value pairs. */
  static Map<String, Object> map(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }

  static ByteBuffer decBytes(Schema s, String v) {
    return DECIMAL.toBytes(new BigDecimal(v), s, s.getLogicalType());
  }

  static GenericFixed decFixed(Schema s, String v) {
    return DECIMAL.toFixed(new BigDecimal(v), s, s.getLogicalType());
  }

  static CharSequence uuid(Schema s, String v) {
    return UUIDS.toCharSequence(UUID.fromString(v), s, s.getLogicalType());
  }

  static int date(Schema s, String v) {
    return DATE.toInt(LocalDate.parse(v), s, s.getLogicalType());
  }
}
