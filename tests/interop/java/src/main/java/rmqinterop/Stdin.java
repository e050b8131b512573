package rmqinterop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicBoolean;

/** Standard input as the harness's stop signal (ClientRun.stop()): a line `stop`, or its end, sets the flag. */
final class Stdin {
    private Stdin() {
    }

    static AtomicBoolean stopSignal() {
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
                    // keep reading until told to stop
                }
            } catch (Exception ignored) {
                // stdin gone: stop as if told
            }
            stop.set(true);
        }, "stdin");
        stdin.setDaemon(true);
        stdin.start();
        return stop;
    }
}
