// Runs one of Kafka's command-line tools (its main class) once per line of a file, in one
// JVM: a JVM start costs seconds, a tool's run a fraction of one. Each line holds one
// run's arguments separated by tabs; run N leaves N.out, N.err (what the tool printed)
// and N.rc (its exit status: the status it gave Kafka's Exit, else 0) in the output
// folder. Started by tools/kafka_cli.py (batch) with Java's source-file mode.
//
//     java -cp KAFKA_JARS ToolBatch.java MAIN_CLASS COMMANDS_FILE OUTPUT_DIR

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.apache.kafka.common.utils.Exit;

public class ToolBatch {
    /** Thrown instead of exiting the JVM when a tool calls Kafka's Exit. */
    static final class Exited extends RuntimeException {
        final int status;

        Exited(int status) {
            super(null, null, false, false);
            this.status = status;
        }
    }

    /** Writes to the buffer of the run in progress (tools may hold on to System.out). */
    static final class Switch extends OutputStream {
        OutputStream target = OutputStream.nullOutputStream();

        @Override
        public void write(int b) throws IOException {
            target.write(b);
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            target.write(b, off, len);
        }
    }

    public static void main(String[] args) throws Exception {
        Method main = Class.forName(args[0]).getMethod("main", String[].class);
        List<String> lines = Files.readAllLines(Path.of(args[1]), StandardCharsets.UTF_8);
        Path outDir = Path.of(args[2]);
        Switch out = new Switch();
        Switch err = new Switch();
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        Exit.setExitProcedure((status, message) -> {
            throw new Exited(status);
        });
        Exit.setHaltProcedure((status, message) -> {
            throw new Exited(status);
        });
        for (int n = 0; n < lines.size(); n++) {
            String[] toolArgs = lines.get(n).isEmpty() ? new String[0] : lines.get(n).split("\t", -1);
            ByteArrayOutputStream stdout = new ByteArrayOutputStream();
            ByteArrayOutputStream stderr = new ByteArrayOutputStream();
            out.target = stdout;
            err.target = stderr;
            int status = 0;
            try {
                main.invoke(null, (Object) toolArgs);
            } catch (InvocationTargetException e) {
                if (e.getCause() instanceof Exited exited) {
                    status = exited.status;
                } else {
                    e.getCause().printStackTrace(System.err);
                    status = 1;
                }
            }
            System.out.flush();
            System.err.flush();
            Files.write(outDir.resolve(n + ".out"), stdout.toByteArray());
            Files.write(outDir.resolve(n + ".err"), stderr.toByteArray());
            Files.writeString(outDir.resolve(n + ".rc"), Integer.toString(status));
        }
        System.exit(0); // an admin client's threads could keep the JVM alive
    }
}
