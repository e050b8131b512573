// Command rmqgo is the interop harness's Go client: Apache's official Go client
// (github.com/apache/rocketmq-client-go/v2, pinned at v2.1.2, which sends version 317 and so gets the
// pre-4.9.4 route bodies) producing and consuming through the NameServer under test. It prints the same lines
// as the Java programs (tests/interop/java/src/main/java/rmqinterop/Producer.java and Consumer.java), so
// tests/interop/rocketmq.py's ClientRun parses either:
//
//	rmqgo produce -namesrv "127.0.0.1:A;127.0.0.1:B" -topic T -count N -prefix p -group G -timeout 120s
//	  (-stdin-stop 1: also end before the next key once standard input says stop, or closes)
//	  STARTED
//	  OK <key> <msgId> <brokerName> <queueId>     once acknowledged (SendOK)
//	  FAIL <key> <reason>                         otherwise; the key is tried again after -retry (200 ms)
//	  GAVEUP <key>                                the timeout ran out while the key kept failing
//	  DONE ok=<n> failed=<n>
//
//	rmqgo consume -namesrv ... -topic T -group G -expect N -timeout 120s
//	  STARTED
//	  RECV <key> <brokerName> <queueId> <msgId>   one per delivery, redeliveries included
//	  DONE distinct=<n>                           after N distinct keys, `stop` (or EOF) on stdin, or the timeout
//
// The client's own logging goes to standard error at warn and above (-log-level changes it), so standard
// output holds only the lines above.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// out serialises writes to standard output (unbuffered: every line is written as soon as it is printed).
var out sync.Mutex

func say(format string, a ...interface{}) {
	out.Lock()
	defer out.Unlock()
	fmt.Fprintf(os.Stdout, format, a...)
}

func die(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "rmqgo: "+format+"\n", a...)
	os.Exit(2)
}

func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// common holds the flags both modes take.
type common struct {
	namesrv, topic, group, instance, acl, logLevel string
	timeout                                        time.Duration
	timeoutS                                       int
}

func (c *common) register(fs *flag.FlagSet, group string, timeout time.Duration) {
	fs.StringVar(&c.namesrv, "namesrv", "", "NameServer addresses, ';'-separated (ip:port;ip:port)")
	fs.StringVar(&c.topic, "topic", "", "topic")
	fs.StringVar(&c.group, "group", group, "producer or consumer group")
	fs.StringVar(&c.instance, "instance", "", "client instance name (default: <mode>-<pid>)")
	fs.StringVar(&c.acl, "acl", "", "accessKey:secretKey to sign requests with (RocketMQ ACL)")
	fs.StringVar(&c.logLevel, "log-level", "warn", "the Go client's log level on stderr: debug, info, warn, error")
	fs.DurationVar(&c.timeout, "timeout", timeout, "give up after this long")
	fs.IntVar(&c.timeoutS, "timeout-s", 0, "the timeout in seconds (the Java programs' flag; overrides -timeout)")
}

func (c *common) setup(mode string) (primitive.NamesrvAddr, time.Time) {
	rlog.SetLogLevel(c.logLevel)
	if c.namesrv == "" || c.topic == "" {
		die("%s: -namesrv and -topic are required", mode)
	}
	addrs, err := primitive.NewNamesrvAddr(c.namesrv)
	if err != nil {
		die("%s: -namesrv %q: %v", mode, c.namesrv, err)
	}
	if c.instance == "" {
		c.instance = fmt.Sprintf("%s-%d", mode, os.Getpid())
	}
	if c.timeoutS > 0 {
		c.timeout = time.Duration(c.timeoutS) * time.Second
	}
	return addrs, time.Now().Add(c.timeout)
}

func (c *common) credentials() (primitive.Credentials, bool) {
	if c.acl == "" {
		return primitive.Credentials{}, false
	}
	i := strings.IndexByte(c.acl, ':')
	if i < 0 {
		die("-acl wants accessKey:secretKey")
	}
	return primitive.Credentials{AccessKey: c.acl[:i], SecretKey: c.acl[i+1:]}, true
}

// shutdown runs stop but does not wait for it longer than 20 s: the lines are already out.
func shutdown(stop func() error) {
	done := make(chan struct{})
	go func() {
		if err := stop(); err != nil {
			fmt.Fprintf(os.Stderr, "rmqgo: shutdown: %v\n", err)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		fmt.Fprintln(os.Stderr, "rmqgo: shutdown did not finish within 20 s")
	}
}

var statusNames = map[primitive.SendStatus]string{
	primitive.SendOK:                "SEND_OK",
	primitive.SendFlushDiskTimeout:  "FLUSH_DISK_TIMEOUT",
	primitive.SendFlushSlaveTimeout: "FLUSH_SLAVE_TIMEOUT",
	primitive.SendSlaveNotAvailable: "SLAVE_NOT_AVAILABLE",
	primitive.SendUnknownError:      "UNKNOWN_ERROR",
}

func statusName(s primitive.SendStatus) string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("%d", int(s))
}

func produce(args []string) {
	fs := flag.NewFlagSet("produce", flag.ExitOnError)
	var c common
	c.register(fs, "interop_producer", 120*time.Second)
	prefix := fs.String("prefix", "m", "keys are <prefix>-0 .. <prefix>-(count-1)")
	count := fs.Int("count", 1000, "messages to send")
	interval := fs.Duration("interval", 0, "pause between keys")
	intervalMs := fs.Int("interval-ms", 0, "pause between keys in ms (the Java flag; overrides -interval)")
	retry := fs.Duration("retry", 200*time.Millisecond, "pause before trying a failed key again")
	retryMs := fs.Int("retry-ms", 0, "the retry pause in ms (the Java flag; overrides -retry)")
	sendTimeout := fs.Duration("send-timeout", 3*time.Second, "one send's timeout")
	sendTimeoutMs := fs.Int("send-timeout-ms", 0, "one send's timeout in ms (the Java flag; overrides -send-timeout)")
	retries := fs.Int("retries", 2, "the client's own retries of one send")
	stdinStop := fs.Int("stdin-stop", 0, "1: also end, before the next key, when standard input says stop (or closes)")
	_ = fs.Parse(args)
	if *intervalMs > 0 {
		*interval = time.Duration(*intervalMs) * time.Millisecond
	}
	if *retryMs > 0 {
		*retry = time.Duration(*retryMs) * time.Millisecond
	}
	if *sendTimeoutMs > 0 {
		*sendTimeout = time.Duration(*sendTimeoutMs) * time.Millisecond
	}
	addrs, deadline := c.setup("producer")

	opts := []producer.Option{
		producer.WithNsResolver(primitive.NewPassthroughResolver(addrs)),
		producer.WithGroupName(c.group),
		producer.WithInstanceName(c.instance),
		producer.WithSendMsgTimeout(*sendTimeout),
		producer.WithRetry(*retries),
	}
	if cred, ok := c.credentials(); ok {
		opts = append(opts, producer.WithCredentials(cred))
	}
	p, err := rocketmq.NewProducer(opts...)
	if err != nil {
		die("new producer: %v", err)
	}
	if err := p.Start(); err != nil {
		die("start producer: %v", err)
	}
	say("STARTED\n")

	var stopped atomic.Bool
	if *stdinStop != 0 {
		go func() {
			in := bufio.NewScanner(os.Stdin)
			for in.Scan() {
				if strings.TrimSpace(in.Text()) == "stop" {
					break
				}
			}
			stopped.Store(true)
		}()
	}
	ok, failed := 0, 0
	for i := 0; i < *count && !stopped.Load(); i++ {
		key := fmt.Sprintf("%s-%d", *prefix, i)
		for {
			msg := primitive.NewMessage(c.topic, []byte("body of "+key))
			msg.WithTag("interop")
			msg.WithKeys([]string{key})
			r, err := p.SendSync(context.Background(), msg)
			if err == nil && r != nil && r.Status == primitive.SendOK {
				say("OK %s %s %s %d\n", key, r.MsgID, r.MessageQueue.BrokerName, r.MessageQueue.QueueId)
				ok++
				break
			}
			switch {
			case err != nil:
				say("FAIL %s %s\n", key, oneLine(err.Error()))
			case r == nil:
				say("FAIL %s no result\n", key)
			default:
				say("FAIL %s status=%s\n", key, statusName(r.Status))
			}
			failed++
			if time.Now().After(deadline) || stopped.Load() {
				say("GAVEUP %s\n", key)
				break
			}
			time.Sleep(*retry)
		}
		if time.Now().After(deadline) {
			break
		}
		if *interval > 0 {
			time.Sleep(*interval)
		}
	}
	say("DONE ok=%d failed=%d\n", ok, failed)
	shutdown(p.Shutdown)
	os.Exit(0)
}

func consume(args []string) {
	fs := flag.NewFlagSet("consume", flag.ExitOnError)
	var c common
	c.register(fs, "interop_consumer", 300*time.Second)
	expect := fs.Int("expect", 0, "stop once this many distinct keys arrived (0: no limit)")
	_ = fs.Parse(args)
	addrs, deadline := c.setup("consumer")

	var mu sync.Mutex
	seen := map[string]struct{}{}
	distinct := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}

	opts := []consumer.Option{
		consumer.WithNsResolver(primitive.NewPassthroughResolver(addrs)),
		consumer.WithGroupName(c.group),
		consumer.WithInstance(c.instance),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithStrategy(consumer.AllocateByAveragely),
	}
	if cred, ok := c.credentials(); ok {
		opts = append(opts, consumer.WithCredentials(cred))
	}
	pc, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		die("new consumer: %v", err)
	}
	err = pc.Subscribe(c.topic, consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		var b strings.Builder
		mu.Lock()
		for _, m := range msgs {
			brokerName, queueID := "", 0
			if m.Queue != nil {
				brokerName, queueID = m.Queue.BrokerName, m.Queue.QueueId
			}
			fmt.Fprintf(&b, "RECV %s %s %d %s\n", m.GetKeys(), brokerName, queueID, m.MsgId)
			seen[m.GetKeys()] = struct{}{}
		}
		mu.Unlock()
		say("%s", b.String())
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		die("subscribe %s: %v", c.topic, err)
	}
	if err := pc.Start(); err != nil {
		die("start consumer: %v", err)
	}
	say("STARTED\n")

	// Standard input: `stop` or its end stops the run; so do SIGINT and SIGTERM.
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			if strings.TrimSpace(in.Text()) == "stop" {
				break
			}
		}
		once.Do(func() { close(stop) })
	}()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-signals
		once.Do(func() { close(stop) })
	}()

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
wait:
	for time.Now().Before(deadline) && (*expect == 0 || distinct() < *expect) {
		select {
		case <-stop:
			break wait
		case <-tick.C:
		}
	}
	say("DONE distinct=%d\n", distinct())
	shutdown(pc.Shutdown)
	os.Exit(0)
}

func main() {
	if len(os.Args) < 2 {
		die("usage: rmqgo produce|consume -namesrv 'ip:port;ip:port' -topic T [flags] (rmqgo <mode> -h for the flags)")
	}
	switch os.Args[1] {
	case "produce":
		produce(os.Args[2:])
	case "consume":
		consume(os.Args[2:])
	default:
		die("unknown mode %q: produce or consume", os.Args[1])
	}
}
