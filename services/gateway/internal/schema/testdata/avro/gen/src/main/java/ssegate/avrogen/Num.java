package ssegate.avrogen;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.util.function.Predicate;

/** Numbers: shortest round-trip digits laid out as ECMAScript's Number::toString does. */
final class Num {
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
