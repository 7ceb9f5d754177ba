package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// member is a classic group member driven by hand: each request on its own
// client, so a JoinGroup or SyncGroup parked at the broker holds no other.
type member struct {
	t     *testing.T
	addr  string
	group string
	id    string
	gen   int32
	meta  byte // the protocol metadata's last byte: a change makes a rebalance
}

func (m *member) cl() *kgo.Client { return newClient(m.t, m.addr, kgo.RequestRetries(0)) }

// join sends JoinGroup (with the member id the broker asks for first)
// and returns the response or an error, after at most d.
func (m *member) join(ctx context.Context, session, rebalance time.Duration) (*kmsg.JoinGroupResponse, error) {
	for {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = m.group, m.id, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = int32(session.Milliseconds()), int32(rebalance.Milliseconds())
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, m.meta}
		req.Protocols = append(req.Protocols, p)
		resp, err := req.RequestWith(ctx, m.cl())
		if err != nil {
			return nil, err
		}
		if kerr.ErrorForCode(resp.ErrorCode) == kerr.MemberIDRequired {
			m.id = resp.MemberID
			continue
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return resp, err
		}
		m.id, m.gen = resp.MemberID, resp.Generation
		return resp, nil
	}
}

func (m *member) sync(ctx context.Context, leader *kmsg.JoinGroupResponse) error {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = m.group, m.id, m.gen
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	if leader != nil {
		for _, x := range leader.Members {
			a := kmsg.NewSyncGroupRequestGroupAssignment()
			a.MemberID, a.MemberAssignment = x.MemberID, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
			req.GroupAssignment = append(req.GroupAssignment, a)
		}
	}
	resp, err := req.RequestWith(ctx, m.cl())
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

func (m *member) heartbeat(ctx context.Context) error {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = m.group, m.id, m.gen
	resp, err := req.RequestWith(ctx, m.cl())
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

func (m *member) leave(ctx context.Context) error {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = m.group
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = m.id
	req.Members = append(req.Members, lm)
	resp, err := req.RequestWith(ctx, m.cl())
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

type joined struct {
	resp *kmsg.JoinGroupResponse
	err  error
	at   time.Time
}

// stableGroup makes a group of a (the leader) and b, both synced.
func stableGroup(t *testing.T, ctx context.Context, addr string, session, rebalance time.Duration) (a, b *member) {
	t.Helper()
	a = &member{t: t, addr: addr, group: "g"}
	b = &member{t: t, addr: addr, group: "g"}
	if _, err := a.join(ctx, session, rebalance); err != nil {
		t.Fatal(err)
	}
	if err := a.sync(ctx, nil); err != nil { // a alone: no assignment needed for the test
		t.Fatal(err)
	}
	bj := make(chan joined, 1)
	go func() { r, err := b.join(ctx, session, rebalance); bj <- joined{r, err, time.Now()} }()
	// b's join rebalances the group; a learns it from its heartbeat.
	for a.heartbeat(ctx) == nil {
		time.Sleep(50 * time.Millisecond)
	}
	ar, err := a.join(ctx, session, rebalance)
	if err != nil {
		t.Fatal(err)
	}
	if r := <-bj; r.err != nil {
		t.Fatal(r.err)
	}
	if ar.LeaderID != a.id {
		t.Fatalf("leader %s, want a (%s)", ar.LeaderID, a.id)
	}
	done := make(chan error, 1)
	go func() { done <- b.sync(ctx, nil) }()
	if err := a.sync(ctx, ar); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return a, b
}

// TestRebalanceAfterSyncWaiterLeft: a member that leaves while its
// SyncGroup waits for the leader's assignment must not throw off the
// count of members joining the next rebalance. The broker used to count
// it off the joiners (which the completed join had already zeroed), so
// the next rebalance waited for one member more than the group had, until
// the rebalance timeout, instead of completing when the last member
// joined, as Kafka does.
func TestRebalanceAfterSyncWaiterLeft(t *testing.T) {
	_, addr := testBroker(t)
	ctx := testCtx(t)
	a, b := stableGroup(t, ctx, addr, 10*time.Second, 30*time.Second)
	// A new rebalance: a and b rejoin; b's sync waits for a's.
	c := &member{t: t, addr: addr, group: "g"}
	cj := make(chan joined, 1)
	go func() { r, err := c.join(ctx, 10*time.Second, 30*time.Second); cj <- joined{r, err, time.Now()} }()
	for a.heartbeat(ctx) == nil {
		time.Sleep(50 * time.Millisecond)
	}
	bj := make(chan joined, 1)
	go func() { r, err := b.join(ctx, 10*time.Second, 30*time.Second); bj <- joined{r, err, time.Now()} }()
	ar, err := a.join(ctx, 10*time.Second, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r := <-bj; r.err != nil {
		t.Fatal(r.err)
	}
	if r := <-cj; r.err != nil {
		t.Fatal(r.err)
	}
	bs := make(chan error, 1)
	go func() { bs <- b.sync(ctx, nil) }()
	time.Sleep(300 * time.Millisecond) // b's sync is parked at the broker
	if err := b.leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-bs; err == nil {
		t.Fatal("b's parked sync succeeded after b left")
	}
	// The group rebalances without b: a and c join, and that completes it.
	_ = ar
	start := time.Now()
	cj2 := make(chan joined, 1)
	go func() { r, err := c.join(ctx, 10*time.Second, 30*time.Second); cj2 <- joined{r, err, time.Now()} }()
	if _, err := a.join(ctx, 10*time.Second, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	r := <-cj2
	if r.err != nil {
		t.Fatal(r.err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the rebalance after b left took %s; every member had joined at once (the rebalance timeout is 30 s)", took.Round(time.Millisecond))
	}
}

// TestJoinOutlivesSession: a member waiting in JoinGroup for a rebalance
// is not expired at its session timeout (on Kafka the rebalance timeout
// bounds that wait: a member awaiting a join satisfies its heartbeats),
// and when the peer the rebalance waits for expires, the join is
// answered. The broker used to remove the waiting member at its session
// timeout and never answer its join: the client waited out its request
// deadline (the rebalance timeout plus kgo's 10 s).
func TestJoinOutlivesSession(t *testing.T) {
	_, addr := testBroker(t)
	ctx := testCtx(t)
	const session = 6 * time.Second
	a, b := stableGroup(t, ctx, addr, session, 40*time.Second)
	// b rejoins at once (its session timer runs from its last
	// heartbeat, now); a heartbeats once more a second later, then falls
	// silent, so a expires a second after b would.
	start := time.Now()
	b.meta = 1 // new metadata: the group rebalances
	bj := make(chan joined, 1)
	go func() { r, err := b.join(ctx, session, 40*time.Second); bj <- joined{r, err, time.Now()} }()
	time.Sleep(time.Second)
	a.heartbeat(ctx) // REBALANCE_IN_PROGRESS; a never rejoins
	r := <-bj
	if r.err != nil {
		t.Fatalf("b's join after %s: %v", r.at.Sub(start).Round(time.Millisecond), r.err)
	}
	took := r.at.Sub(start)
	if took > session+5*time.Second {
		t.Errorf("b's join was answered after %s, want about a's session timeout (%s)", took.Round(time.Millisecond), session)
	}
	if len(r.resp.Members) != 1 || r.resp.LeaderID != b.id {
		t.Errorf("b's join: leader %s, %d members; want b alone", r.resp.LeaderID, len(r.resp.Members))
	}
	t.Logf("b's join answered after %s (a expired)", took.Round(time.Millisecond))
}

// TestDeadJoinerExpires: a member whose client dies while its JoinGroup
// waits in a rebalance (kill -9 mid-join) is expired at its session
// timeout once the join completes, as on Kafka, though its answer could
// not be delivered. The broker used to arm a member's session timer only
// when an answer reached it, so such a member stayed in the group for
// good: the stable group kept it (and its partitions), and the next
// rebalance waited for its rejoin until the rebalance timeout (seen in
// TestChaosBinary: a final run's JoinGroup answered after exactly 60 s).
func TestDeadJoinerExpires(t *testing.T) {
	_, addr := testBroker(t)
	ctx := testCtx(t)
	const session, rebalance = 6 * time.Second, 40 * time.Second
	a := &member{t: t, addr: addr, group: "g"}
	if _, err := a.join(ctx, session, rebalance); err != nil {
		t.Fatal(err)
	}
	if err := a.sync(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// b's JoinGroup parks (the group waits for a to rejoin); then b's
	// client dies.
	b := &member{t: t, addr: addr, group: "g"}
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.ProtocolType = "g", "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = int32(session.Milliseconds()), int32(rebalance.Milliseconds())
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0}
	req.Protocols = append(req.Protocols, p)
	resp, err := req.RequestWith(ctx, b.cl())
	if err != nil || kerr.ErrorForCode(resp.ErrorCode) != kerr.MemberIDRequired {
		t.Fatalf("first join: %v %v", err, resp)
	}
	req.MemberID = resp.MemberID
	dying, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	parked := make(chan error, 1)
	go func() { _, err := req.RequestWith(ctx, dying); parked <- err }()
	for a.heartbeat(ctx) == nil { // b's join started the rebalance
		time.Sleep(50 * time.Millisecond)
	}
	dying.Close() // kill -9: the connection goes, the join still waits at the broker
	<-parked
	// a rejoins: the join completes with a and the dead b; a syncs as
	// the leader and the group is stable with b in it.
	ar, err := a.join(ctx, session, rebalance)
	if err != nil {
		t.Fatal(err)
	}
	if len(ar.Members) != 2 {
		t.Fatalf("the join completed with %d members, want a and the dead b", len(ar.Members))
	}
	if err := a.sync(ctx, ar); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// b never heartbeats: it expires at its session timeout and the
	// group rebalances, which a learns from its heartbeat.
	for {
		err := a.heartbeat(ctx)
		if errors.Is(err, kerr.RebalanceInProgress) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(start) > session+10*time.Second {
			t.Fatalf("the dead member is still in the group %s after the join completed (session timeout %s)", time.Since(start).Round(time.Millisecond), session)
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(start)
	ar, err = a.join(ctx, session, rebalance)
	if err != nil {
		t.Fatal(err)
	}
	if len(ar.Members) != 1 || ar.LeaderID != a.id {
		t.Fatalf("after b expired: leader %s, %d members; want a alone", ar.LeaderID, len(ar.Members))
	}
	t.Logf("the dead member expired %s after the join completed (session timeout %s)", took.Round(time.Millisecond), session)
}
