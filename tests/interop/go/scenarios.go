package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

func init() {
	register("sync", syncSend)
	register("async", asyncSend)
	register("oneway_close", onewayClose)
	register("batch", batch)
	register("delay", delay)
	register("tag_filter", tagFilter)
	register("orderly", orderly)
	register("broadcasting", broadcasting)
	register("clustering", clustering)
	register("retry", retry)
	register("pull_poll", pullPoll)
	register("pull_from", pullFrom)
	register("zlib", zlib)
	register("transaction", transaction)
	register("sdk_produced", sdkProduced)
}

// sdkProduced: 20 messages pocketmq's Python SDK sent before this run (tags FromSdk, keys
// sdk-<i>, property origin=pocketmq-sdk, every 5th body 6 KiB and zlib-compressed) arrive whole.
func sdkProduced(r run) (string, error) {
	c, err := collectN(r, "FromSdk", 20, 30*time.Second)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.distinct {
		i, err := strconv.Atoi(strings.TrimPrefix(m.GetKeys(), "sdk-"))
		if err != nil {
			return "", fmt.Errorf("keys %q", m.GetKeys())
		}
		want := []byte(fmt.Sprintf("sdk-%d ", i))
		if i%5 == 0 {
			want = bytes.Repeat(want, 1000)
		}
		if !bytes.Equal(m.Body, want) || m.GetProperty("origin") != "pocketmq-sdk" {
			return "", fmt.Errorf("message %d changed: %d bytes, origin %q", i, len(m.Body), m.GetProperty("origin"))
		}
	}
	return "20 SDK-sent messages (4 compressed) consumed whole", nil
}

func newProducer(r run, role string, opts ...producer.Option) (rocketmq.Producer, error) {
	base := []producer.Option{
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{r.namesrv})),
		producer.WithGroupName(r.name("PG_" + role)),
		producer.WithInstanceName(r.name("I_" + role)),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(10 * time.Second),
	}
	p, err := rocketmq.NewProducer(append(base, opts...)...)
	if err != nil {
		return nil, err
	}
	return p, p.Start()
}

func consumerOpts(r run, role string, opts ...consumer.Option) []consumer.Option {
	base := []consumer.Option{
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{r.namesrv})),
		consumer.WithGroupName(r.name("CG")),
		consumer.WithInstance(r.name("I_" + role)),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}
	return append(base, opts...)
}

// collector keeps every delivery of a concurrently consuming push consumer.
type collector struct {
	mu       sync.Mutex
	distinct map[string]*primitive.MessageExt
	all      []*primitive.MessageExt
	at       map[string]time.Time
}

func newCollector() *collector {
	return &collector{distinct: map[string]*primitive.MessageExt{}, at: map[string]time.Time{}}
}

func (c *collector) consume(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		c.all = append(c.all, m)
		if _, ok := c.distinct[m.MsgId]; !ok {
			c.distinct[m.MsgId] = m
			c.at[m.MsgId] = time.Now()
		}
	}
	return consumer.ConsumeSuccess, nil
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.distinct)
}

func (c *collector) await(n int, timeout time.Duration) error {
	return waitFor(func() string { return fmt.Sprintf("%d distinct messages (have %d)", n, c.count()) },
		timeout, func() bool { return c.count() >= n })
}

func startCollector(r run, role, expr string, c *collector, opts ...consumer.Option) (rocketmq.PushConsumer, error) {
	pc, err := rocketmq.NewPushConsumer(consumerOpts(r, role, opts...)...)
	if err != nil {
		return nil, err
	}
	if err := pc.Subscribe(r.topic(), consumer.MessageSelector{Type: consumer.TAG, Expression: expr}, c.consume); err != nil {
		return nil, err
	}
	return pc, pc.Start()
}

// collectN consumes n distinct messages of the scenario's topic with a new push consumer, then
// stops it.
func collectN(r run, expr string, n int, timeout time.Duration) (*collector, error) {
	c := newCollector()
	pc, err := startCollector(r, "c", expr, c)
	if err != nil {
		return nil, err
	}
	defer pc.Shutdown()
	return c, c.await(n, timeout)
}

func msg(r run, tag, key, body string) *primitive.Message {
	m := primitive.NewMessage(r.topic(), []byte(body))
	m.WithTag(tag)
	m.WithKeys([]string{key})
	m.WithProperty("scenario", r.scenario)
	return m
}

func sendN(p rocketmq.Producer, r run, n int) error {
	for i := 0; i < n; i++ {
		res, err := p.SendSync(bg, msg(r, "A", "K"+strconv.Itoa(i), "b"+strconv.Itoa(i)))
		if err != nil {
			return err
		}
		if res.Status != primitive.SendOK {
			return fmt.Errorf("send status %v", res)
		}
	}
	return nil
}

// produceThenCollect sends n messages and consumes them back with a new push consumer.
func produceThenCollect(r run, n int, expr string, opts ...consumer.Option) (*collector, error) {
	p, err := newProducer(r, "p")
	if err != nil {
		return nil, err
	}
	defer p.Shutdown()
	if err := sendN(p, r, n); err != nil {
		return nil, err
	}
	c := newCollector()
	pc, err := startCollector(r, "c", expr, c, opts...)
	if err != nil {
		return nil, err
	}
	defer pc.Shutdown()
	return c, c.await(n, 30*time.Second)
}

func syncSend(r run) (string, error) {
	c, err := produceThenCollect(r, 10, "*")
	if err != nil {
		return "", err
	}
	for _, m := range c.distinct {
		if m.GetProperty("scenario") != r.scenario || m.GetTags() != "A" || m.Topic != r.topic() {
			return "", fmt.Errorf("message changed: %v", m)
		}
	}
	return "10 sent and consumed, tags/properties intact", nil
}

func asyncSend(r run) (string, error) {
	p, err := newProducer(r, "p")
	if err != nil {
		return "", err
	}
	defer p.Shutdown()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for i := 0; i < 10; i++ {
		wg.Add(1)
		err := p.SendAsync(bg, func(_ context.Context, res *primitive.SendResult, err error) {
			defer wg.Done()
			if err != nil || res.Status != primitive.SendOK {
				mu.Lock()
				failures = append(failures, fmt.Sprint(res, err))
				mu.Unlock()
			}
		}, msg(r, "A", "K", "b"+strconv.Itoa(i)))
		if err != nil {
			return "", err
		}
	}
	wg.Wait()
	if len(failures) > 0 {
		return "", fmt.Errorf("async failures: %v", failures)
	}
	_, err = collectN(r, "*", 10, 30*time.Second)
	return "10 async sends acknowledged and consumed", err
}

// onewayClose: 200 oneway sends, then Shutdown with their (flag 0) replies unread, so the close
// is an RST: the broker serves every request that reached it before the close (issue 25,
// defect A) and drops the replies silently. The driver first gives its own kernel 300 ms to
// transmit: an RST also discards whatever the client's kernel had not sent yet (segments waiting
// for the broker's ACKs), which no broker can serve. Without that pause Apache RocketMQ 4.9.7
// stored 55 and 172 of the 200 in 2 of 10 runs, pocketmq about as often. The broker's side of
// it, bytes accepted by its kernel and not yet read when the RST comes, is
// tests/fault/test_oneway_rst.py and tests/remoting/test_backlog.py.
func onewayClose(r run) (string, error) {
	p, err := newProducer(r, "p")
	if err != nil {
		return "", err
	}
	for i := 0; i < 200; i++ {
		if err := p.SendOneWay(bg, msg(r, "A", "K", "b"+strconv.Itoa(i))); err != nil {
			p.Shutdown()
			return "", err
		}
	}
	time.Sleep(300 * time.Millisecond)
	p.Shutdown()
	_, err = collectN(r, "*", 200, 30*time.Second)
	return "200 oneway sends then close: 200 stored", err
}

func batch(r run) (string, error) {
	p, err := newProducer(r, "p")
	if err != nil {
		return "", err
	}
	defer p.Shutdown()
	var msgs []*primitive.Message
	for i := 0; i < 20; i++ {
		msgs = append(msgs, msg(r, "A", "K", "b"+strconv.Itoa(i)))
	}
	res, err := p.SendSync(bg, msgs...)
	if err != nil {
		return "", err
	}
	if res.Status != primitive.SendOK {
		return "", fmt.Errorf("batch status %v", res)
	}
	c, err := collectN(r, "*", 20, 30*time.Second)
	if err != nil {
		return "", err
	}
	queues := map[int]bool{}
	for _, m := range c.distinct {
		queues[m.Queue.QueueId] = true
	}
	if len(queues) != 1 {
		return "", fmt.Errorf("one batch spread over queues %v", queues)
	}
	return "batch of 20 stored in one queue", nil
}

func delay(r run) (string, error) {
	p, err := newProducer(r, "p")
	if err != nil {
		return "", err
	}
	defer p.Shutdown()
	c := newCollector()
	pc, err := startCollector(r, "c", "*", c)
	if err != nil {
		return "", err
	}
	defer pc.Shutdown()
	sent := time.Now()
	for i := 0; i < 3; i++ {
		m := msg(r, "A", "K", "b"+strconv.Itoa(i))
		m.WithDelayTimeLevel(2) // 5 s
		if _, err := p.SendSync(bg, m); err != nil {
			return "", err
		}
	}
	if err := c.await(3, 40*time.Second); err != nil {
		return "", err
	}
	for id, m := range c.distinct {
		if waited := c.at[id].Sub(sent); waited < 4*time.Second {
			return "", fmt.Errorf("delivered after %s; level 2 is 5 s", waited)
		}
		if m.GetProperty("DELAY") != "2" || m.Topic != r.topic() {
			return "", fmt.Errorf("DELAY %q topic %q", m.GetProperty("DELAY"), m.Topic)
		}
	}
	return "3 level-2 messages delivered after >= 4 s with DELAY=2", nil
}

func tagFilter(r run) (string, error) {
	p, err := newProducer(r, "p")
	if err != nil {
		return "", err
	}
	defer p.Shutdown()
	tags := []string{"TagB", "TagA", "TagC"}
	for i := 0; i < 15; i++ {
		if _, err := p.SendSync(bg, msg(r, tags[i%3], "K", tags[i%3])); err != nil {
			return "", err
		}
	}
	c, err := collectN(r, "TagA || TagC", 10, 30*time.Second)
	if err != nil {
		return "", err
	}
	time.Sleep(500 * time.Millisecond) // a TagB delivery would have come with its queue's first pull
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.all {
		if m.GetTags() == "TagB" {
			return "", fmt.Errorf("TagB delivered")
		}
	}
	return "TagA || TagC: 10 of 15, no TagB", nil
}

func orderly(r run) (string, error) {
	p, err := newProducer(r, "p", producer.WithQueueSelector(producer.NewHashQueueSelector()))
	if err != nil {
		return "", err
	}
	defer p.Shutdown()
	const orders, perOrder = 4, 10
	for seq := 0; seq < perOrder; seq++ {
		for o := 0; o < orders; o++ {
			m := msg(r, "A", "K", fmt.Sprintf("%d:%d", o, seq))
			m.WithShardingKey("order-" + strconv.Itoa(o))
			if _, err := p.SendSync(bg, m); err != nil {
				return "", err
			}
		}
	}
	var mu sync.Mutex
	seen := map[string][]int{}
	suspended := false
	total := 0
	pc, err := rocketmq.NewPushConsumer(consumerOpts(r, "c", consumer.WithConsumerOrder(true))...)
	if err != nil {
		return "", err
	}
	err = pc.Subscribe(r.topic(), consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			parts := strings.Split(string(m.Body), ":")
			seq, _ := strconv.Atoi(parts[1])
			if parts[0] == "1" && seq == 5 && !suspended {
				suspended = true
				return consumer.SuspendCurrentQueueAMoment, nil
			}
			seen[parts[0]] = append(seen[parts[0]], seq)
			total++
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		return "", err
	}
	if err := pc.Start(); err != nil {
		return "", err
	}
	defer pc.Shutdown()
	err = waitFor(func() string { return "every order consumed" }, 40*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return total >= orders*perOrder
	})
	if err != nil {
		return "", err
	}
	mu.Lock()
	defer mu.Unlock()
	for o, l := range seen {
		for i, s := range l {
			if s != i {
				return "", fmt.Errorf("order %s consumed as %v", o, l)
			}
		}
	}
	return "4 orders x 10 in sequence, a suspend included", nil
}

func broadcasting(r run) (string, error) {
	var cs []*collector
	for i := 0; i < 2; i++ {
		c := newCollector()
		pc, err := startCollector(r, "c"+strconv.Itoa(i), "*", c, consumer.WithConsumerModel(consumer.BroadCasting))
		if err != nil {
			return "", err
		}
		defer pc.Shutdown()
		cs = append(cs, c)
	}
	p, err := newProducer(r, "p")
	if err != nil {
		return "", err
	}
	defer p.Shutdown()
	if err := sendN(p, r, 10); err != nil {
		return "", err
	}
	for _, c := range cs {
		if err := c.await(10, 30*time.Second); err != nil {
			return "", err
		}
	}
	return "both broadcasting consumers got all 10", nil
}

func clustering(r run) (string, error) {
	var cs []*collector
	for i := 0; i < 2; i++ {
		c := newCollector()
		pc, err := startCollector(r, "c"+strconv.Itoa(i), "*", c)
		if err != nil {
			return "", err
		}
		defer pc.Shutdown()
		cs = append(cs, c)
	}
	p, err := newProducer(r, "p")
	if err != nil {
		return "", err
	}
	defer p.Shutdown()
	// keep sending until both members got some: the Go client rebalances every 20 s at most
	union := func() (int, int) {
		ids := map[string]int{}
		for i, c := range cs {
			c.mu.Lock()
			for id := range c.distinct {
				ids[id] |= 1 << i
			}
			c.mu.Unlock()
		}
		both := 0
		for _, v := range ids {
			if v == 3 {
				both++
			}
		}
		return len(ids), both
	}
	sent := 0
	err = waitFor(func() string { return fmt.Sprintf("both members consuming (%d, %d)", cs[0].count(), cs[1].count()) },
		40*time.Second, func() bool {
			if err := sendN(p, r, 4); err != nil {
				return false
			}
			sent += 4
			time.Sleep(200 * time.Millisecond)
			return cs[0].count() > 0 && cs[1].count() > 0
		})
	if err != nil {
		return "", err
	}
	if err := waitFor(func() string { return "every message consumed" }, 30*time.Second, func() bool {
		n, _ := union()
		return n >= sent
	}); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d split %d/%d", sent, cs[0].count(), cs[1].count()), nil
}

func retry(r run) (string, error) {
	p, err := newProducer(r, "p")
	if err != nil {
		return "", err
	}
	defer p.Shutdown()
	if err := sendN(p, r, 2); err != nil {
		return "", err
	}
	var mu sync.Mutex
	times := map[string][]time.Time{}
	var redelivered []*primitive.MessageExt
	pc, err := rocketmq.NewPushConsumer(consumerOpts(r, "c")...)
	if err != nil {
		return "", err
	}
	err = pc.Subscribe(r.topic(), consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		later := false
		for _, m := range msgs {
			k := m.GetKeys()
			times[k] = append(times[k], time.Now())
			if len(times[k]) == 1 {
				later = true
			} else {
				redelivered = append(redelivered, m)
			}
		}
		if later {
			return consumer.ConsumeRetryLater, nil
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		return "", err
	}
	if err := pc.Start(); err != nil {
		return "", err
	}
	defer pc.Shutdown()
	err = waitFor(func() string { return "2 redeliveries" }, 45*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(times) == 2 && len(times["K0"]) >= 2 && len(times["K1"]) >= 2
	})
	if err != nil {
		return "", err
	}
	mu.Lock()
	defer mu.Unlock()
	for k, t := range times {
		if waited := t[1].Sub(t[0]); waited < 9*time.Second {
			return "", fmt.Errorf("%s retried after %s; level 3 is 10 s", k, waited)
		}
	}
	for _, m := range redelivered {
		if m.ReconsumeTimes != 1 || m.Topic != r.topic() {
			return "", fmt.Errorf("redelivery reconsumeTimes %d topic %s", m.ReconsumeTimes, m.Topic)
		}
	}
	return "ConsumeRetryLater: redelivered after ~10 s, reconsumeTimes 1, topic restored", nil
}

func newPull(r run) (rocketmq.PullConsumer, error) {
	return rocketmq.NewPullConsumer(consumerOpts(r, "pull")...)
}

func pullPoll(r run) (string, error) {
	p, err := newProducer(r, "p")
	if err != nil {
		return "", err
	}
	defer p.Shutdown()
	if err := sendN(p, r, 10); err != nil {
		return "", err
	}
	pc, err := newPull(r)
	if err != nil {
		return "", err
	}
	if err := pc.Subscribe(r.topic(), consumer.MessageSelector{}); err != nil {
		return "", err
	}
	if err := pc.Start(); err != nil {
		return "", err
	}
	defer pc.Shutdown()
	got := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < 10 && time.Now().Before(deadline) {
		cr, err := pc.Poll(bg, time.Second)
		if err != nil || cr == nil {
			continue
		}
		for _, m := range cr.GetMsgList() {
			got[m.MsgId] = true
		}
		pc.ACK(bg, cr, consumer.ConsumeSuccess)
	}
	if len(got) != 10 {
		return "", fmt.Errorf("polled %d", len(got))
	}
	return "Poll + ACK got 10", nil
}

func pullFrom(r run) (string, error) {
	p, err := newProducer(r, "p")
	if err != nil {
		return "", err
	}
	defer p.Shutdown()
	if err := sendN(p, r, 10); err != nil {
		return "", err
	}
	pc, err := newPull(r)
	if err != nil {
		return "", err
	}
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{r.namesrv})))
	if err != nil {
		return "", err
	}
	defer adm.Close()
	mqs, err := adm.FetchPublishMessageQueues(bg, r.topic())
	if err != nil {
		return "", err
	}
	if err := pc.Assign(r.topic(), mqs); err != nil { // PullFrom needs assigned queues
		return "", err
	}
	if err := pc.Start(); err != nil {
		return "", err
	}
	defer pc.Shutdown()
	total := 0
	for _, mq := range mqs {
		offset := int64(0)
		for {
			res, err := pc.PullFrom(bg, mq, offset, 32)
			if err != nil {
				return "", err
			}
			if res.Status != primitive.PullFound {
				break
			}
			total += len(res.GetMessageExts())
			offset = res.NextBeginOffset
			if offset >= res.MaxOffset { // another pull would be held by the broker (long polling)
				break
			}
		}
	}
	if total != 10 {
		return "", fmt.Errorf("PullFrom got %d", total)
	}
	return "PullFrom over every queue got 10", nil
}

// zlib: a body over the 4 KiB threshold goes compressed (sysFlag bit 0) and comes back whole.
func zlib(r run) (string, error) {
	p, err := newProducer(r, "p")
	if err != nil {
		return "", err
	}
	defer p.Shutdown()
	body := bytes.Repeat([]byte("pocketmq-zlib "), 1000)
	if _, err := p.SendSync(bg, primitive.NewMessage(r.topic(), body)); err != nil {
		return "", err
	}
	c, err := collectN(r, "*", 1, 30*time.Second)
	if err != nil {
		return "", err
	}
	for _, m := range c.distinct {
		if !bytes.Equal(m.Body, body) {
			return "", fmt.Errorf("body of %d bytes came back as %d", len(body), len(m.Body))
		}
	}
	return fmt.Sprintf("%d-byte body compressed and restored", len(body)), nil
}

type txListener struct {
	mu     sync.Mutex
	checks int
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch string(m.Body) {
	case "commit":
		return primitive.CommitMessageState
	case "rollback":
		return primitive.RollbackMessageState
	}
	return primitive.UnkonwnState
}

func (l *txListener) CheckLocalTransaction(*primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checks++
	return primitive.CommitMessageState
}

func transaction(r run) (string, error) {
	l := &txListener{}
	p, err := rocketmq.NewTransactionProducer(l,
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{r.namesrv})),
		producer.WithGroupName(r.name("PG")), producer.WithInstanceName(r.name("I_p")), producer.WithRetry(1))
	if err != nil {
		return "", err
	}
	if err := p.Start(); err != nil {
		return "", err
	}
	defer p.Shutdown()
	c := newCollector()
	pc, err := startCollector(r, "c", "*", c)
	if err != nil {
		return "", err
	}
	defer pc.Shutdown()
	for _, what := range []string{"commit", "rollback", "check"} {
		res, err := p.SendMessageInTransaction(bg, primitive.NewMessage(r.topic(), []byte(what)))
		if err != nil {
			return "", err
		}
		if res.Status != primitive.SendOK {
			return "", fmt.Errorf("%s: %v", what, res)
		}
	}
	if err := c.await(2, 60*time.Second); err != nil {
		return "", err
	}
	time.Sleep(500 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.all {
		if string(m.Body) == "rollback" {
			return "", fmt.Errorf("a rolled-back message was delivered")
		}
	}
	return "commit delivered, rollback dropped, UNKNOWN committed by check-back", nil
}
