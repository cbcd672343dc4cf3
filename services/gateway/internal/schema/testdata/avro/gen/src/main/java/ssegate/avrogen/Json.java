package ssegate.avrogen;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.Base64;
import java.util.Collection;
import java.util.Map;

import org.apache.avro.LogicalType;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericFixed;
import org.apache.avro.generic.IndexedRecord;

/**
 * The rendering (Avro datum -> JSON) the gateway must reproduce, written independently of Avro's
 * JSON encoder: unions without a wrapper, bytes and fixed as base64, decimals as strings with
 * {@code scale} digits, dates and times as text, NaN and infinities as strings, numbers as
 * {@link Num} writes them.
 */
final class Json {
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
      case ARRAY:
        writeArray(sb, s, (Collection<?>) v);
        break;
      case MAP:
        writeMap(sb, s, (Map<?, ?>) v);
        break;
      case RECORD:
        writeRecord(sb, s, (IndexedRecord) v);
        break;
      case UNION: {
        int branch = GenericData.get().resolveUnion(s, v);
        write(sb, s.getTypes().get(branch), v);
        break;
      }
      default:
        throw new IllegalArgumentException("unexpected type " + s.getType());
    }
  }

  private static void writeArray(StringBuilder sb, Schema s, Collection<?> v) {
    sb.append('[');
    boolean first = true;
    for (Object item : v) {
      if (!first) {
        sb.append(',');
      }
      first = false;
      write(sb, s.getElementType(), item);
    }
    sb.append(']');
  }

  private static void writeMap(StringBuilder sb, Schema s, Map<?, ?> v) {
    sb.append('{');
    boolean first = true;
    for (Map.Entry<?, ?> e : v.entrySet()) {
      if (!first) {
        sb.append(',');
      }
      first = false;
      quote(sb, e.getKey().toString());
      sb.append(':');
      write(sb, s.getValueType(), e.getValue());
    }
    sb.append('}');
  }

  private static void writeRecord(StringBuilder sb, Schema s, IndexedRecord r) {
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
