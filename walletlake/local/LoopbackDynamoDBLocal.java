// Starts Amazon's DynamoDB Local with its HTTP listener bound to one address (127.0.0.1 by default).
// DynamoDB Local has no bind-address option and would otherwise listen on every interface; this
// launcher builds the server exactly as DynamoDB Local's own ServerRunner does, then sets the host
// of its Jetty connector before starting it. Run with Java's single-file source launcher:
//   java -cp DynamoDBLocal.jar LoopbackDynamoDBLocal.java <host> <DynamoDB Local arguments...>
import java.lang.reflect.Field;
import java.util.Arrays;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public class LoopbackDynamoDBLocal {
    public static void main(String[] args) throws Exception {
        String host = args[0];
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(rest);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server server = (Server) field.get(proxy);
        for (Connector connector : server.getConnectors()) {
            ((ServerConnector) connector).setHost(host);
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                proxy.stop();
            } catch (Exception ignored) {
                // the JVM is exiting; nothing more to do
            }
        }));
        proxy.start();
        System.out.println("DynamoDB Local listening on " + host);
        proxy.join();
    }
}
