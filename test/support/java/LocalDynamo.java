import java.io.InputStream;
import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

/**
 * Test-only launcher for DynamoDB Local (3.x) that binds to 127.0.0.1 on an ephemeral port.
 *
 * <p>DynamoDB Local has no bind-address option, so this builds the server through the public
 * {@code ServerRunner.createServerFromCommandLineArgs}, reaches the private Jetty {@code server}
 * field of the returned {@code DynamoDBProxyServer}, and rewrites every {@code ServerConnector}
 * to host 127.0.0.1 / port 0 before starting it.
 *
 * <p>Protocol with the harness (test/support/globalSetup.ts): once listening, prints a single line
 * {@code PORT <n>} on stdout (DynamoDB Local prints its own banner lines too). Exits when stdin
 * reaches EOF, so the server dies with the test runner even if the runner crashes.
 */
public final class LocalDynamo {
  private LocalDynamo() {}

  public static void main(String[] args) throws Exception {
    // Installed first so that a runner dying mid-start-up still takes this JVM down.
    Thread watchdog =
        new Thread(
            () -> {
              InputStream in = System.in;
              byte[] buffer = new byte[256];
              try {
                while (in.read(buffer) != -1) {
                  // ignore input; only EOF matters
                }
              } catch (Exception ignored) {
                // treat a broken stdin like EOF
              }
              System.exit(0);
            },
            "stdin-eof-watchdog");
    watchdog.setDaemon(true);
    watchdog.start();

    // The CLI rejects "-port 0" ("Port number must lie between 1 and 65535"), so pass a
    // placeholder: it only feeds Jetty's default connector, which is rebound below before start.
    DynamoDBProxyServer proxy =
        ServerRunner.createServerFromCommandLineArgs(
            new String[] {"-inMemory", "-sharedDb", "-disableTelemetry", "-port", "8000"});

    Field field = DynamoDBProxyServer.class.getDeclaredField("server");
    field.setAccessible(true);
    Server server = (Server) field.get(proxy);

    int rewritten = 0;
    for (Connector connector : server.getConnectors()) {
      if (connector instanceof ServerConnector) {
        ServerConnector serverConnector = (ServerConnector) connector;
        serverConnector.setHost("127.0.0.1");
        serverConnector.setPort(0);
        rewritten++;
      }
    }
    if (rewritten == 0) {
      System.err.println("LocalDynamo: no ServerConnector found on the Jetty server; refusing to start");
      System.exit(2);
    }

    // safeStart() = Jetty Server.start() only: it rethrows bind errors (start() swallows
    // SocketException and merely prints it) and never sends start-up telemetry.
    proxy.safeStart();

    int port = -1;
    for (Connector connector : server.getConnectors()) {
      if (connector instanceof ServerConnector) {
        port = ((ServerConnector) connector).getLocalPort();
      }
    }
    if (port <= 0) {
      System.err.println("LocalDynamo: server started but reports no bound port");
      System.exit(3);
    }

    System.out.println("PORT " + port);
    System.out.flush();

    server.join();
  }
}
