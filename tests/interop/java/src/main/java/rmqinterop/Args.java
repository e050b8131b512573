package rmqinterop;

import java.util.HashMap;
import java.util.Map;

/** `--name value` pairs from the command line, with defaults; the harness passes everything explicitly. */
final class Args {
    private final Map<String, String> values = new HashMap<>();

    Args(String[] argv) {
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name value, got " + argv[i]);
            }
            values.put(argv[i].substring(2), argv[i + 1]);
        }
    }

    String get(String name) {
        String v = values.get(name);
        if (v == null) {
            throw new IllegalArgumentException("missing --" + name);
        }
        return v;
    }

    String get(String name, String dflt) {
        return values.getOrDefault(name, dflt);
    }

    int getInt(String name, int dflt) {
        return Integer.parseInt(get(name, Integer.toString(dflt)));
    }
}
