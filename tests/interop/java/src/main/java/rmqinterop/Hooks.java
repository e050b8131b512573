package rmqinterop;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.remoting.RPCHook;

/** RocketMQ's own ACL signing hook when `--acl accessKey:secretKey` is given, else none. */
final class Hooks {
    private Hooks() {
    }

    static RPCHook acl(Args args) {
        String acl = args.get("acl", "");
        if (acl.isEmpty()) {
            return null;
        }
        int colon = acl.indexOf(':');
        return new AclClientRPCHook(new SessionCredentials(acl.substring(0, colon), acl.substring(colon + 1)));
    }
}
