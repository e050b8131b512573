package rmqinterop;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * Runs mqadmin commands through rocketmq-tools' own `MQAdminStartup.main0` in one JVM (one JVM start is 4-6 s;
 * a batch of twenty would take two minutes one by one). Each standard-input line is one command, its words
 * separated by tabs; for each, the command's standard output and error are printed between
 * `=== BEGIN n` and `=== END n`. main0 is given no hook, so it signs as the stock tool does (conf/tools.yml under
 * ROCKETMQ_HOME, when present).
 */
public final class AdminBatch {
    public static void main(String[] argv) throws Exception {
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<String[]> commands = new ArrayList<>();
        String line;
        while ((line = in.readLine()) != null) {
            if (!line.isEmpty()) {
                commands.add(line.split("\t"));
            }
        }
        for (int i = 0; i < commands.size(); i++) {
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            PrintStream capture = new PrintStream(buf, true, StandardCharsets.UTF_8);
            System.setOut(capture);
            System.setErr(capture);
            try {
                MQAdminStartup.main0(commands.get(i), null);
            } catch (Throwable t) {
                t.printStackTrace(capture);
            } finally {
                capture.flush();
                System.setOut(realOut);
                System.setErr(realErr);
            }
            realOut.println("=== BEGIN " + i);
            realOut.print(buf.toString(StandardCharsets.UTF_8));
            realOut.println("=== END " + i);
            realOut.flush();
        }
        System.exit(0);
    }
}
