// Package redislander lands a ubik changelog into Redis.
//
// Each identity is a hash {value, window_start, revision, final, window_end,
// key} under the key Prefix + query + ":" + group (History appends ":" and
// the decimal window start). A record is written, the whole hash at once,
// only when its (window_start, revision) is past the stored pair.
//
// The guard is a server-side function: it compares the stored pair and
// writes the hash in one atomic call, several keys a call, calls
// pipelined. With Options.Optimistic, on a single server (a
// *redis.Client), it is Redis's optimistic check-and-set instead: on one
// connection, WATCH a group of keys and read their stored pairs, compare
// in the client, then MULTI, HSET of the keys that move forward, EXEC.
// EXEC runs nothing when a watched key changed meanwhile (another writer);
// the group is then read and compared again, and after a few aborts it
// goes through the function, which cannot abort, so every group makes
// progress. Both guards compare alike and write the same hash; they may
// race on the same keys.
//
// Lua numbers are doubles, exact only to 2^53; window starts (µs) and
// revisions (uint64) are therefore compared as canonical decimal strings,
// never through tonumber. The function is loaded with FUNCTION LOAD
// (Redis 7); on older servers the same code runs as a script through
// EVALSHA. Both are reloaded when the server lost them (a restart without
// persistence). An error reply that points at the configuration (NOPERM,
// WRONGPASS, NOAUTH) is land.ErrConfig, which stops land.Run; a server out
// of reach is retried.
package redislander

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/internal/pool"
)

// Options configure a Lander.
type Options struct {
	// Client is the host's Redis client; Close does not close it.
	Client redis.UniversalClient
	// Mode is the identity rule (required).
	Mode land.Mode
	// Query, when set, is the namespace of records that carry no query
	// name, and the only query this lander accepts.
	Query string
	// Prefix goes before every key (default: none).
	Prefix string
	// KeysPerCall is the number of keys one function call guards (default
	// 64; always 1 on a cluster client, whose keys may live on different
	// nodes).
	KeysPerCall int
	// CallsPerPipeline bounds the calls of one round trip (default 32).
	CallsPerPipeline int
	// Pipelines bounds the round trips in flight at once, each on its own
	// connection (default 4), so that the server never waits for the
	// client to encode the next one.
	Pipelines int
	// Optimistic guards keys with WATCH/MULTI/EXEC, KeysPerCall keys a
	// transaction, instead of the function (single-server clients only;
	// ignored on a cluster or ring client). The server spends a little
	// less per record (4.2 to 4.7 µs against 4.4 to 5.9 on Redis 7.0), the
	// client more, and ubik land was no faster with it (bench/README.md).
	Optimistic bool
	// MaxAborts bounds the aborted transactions of one group of keys
	// before it goes through the function (Optimistic; default 3).
	MaxAborts int
}

// Lander lands into Redis. It is safe for concurrent use.
type Lander struct {
	o       Options
	useFn   atomic.Bool // FUNCTION/FCALL available
	sha     string
	closed  atomic.Bool
	cluster bool
	// single is the client of a single server whose chunks are guarded by
	// WATCH/MULTI/EXEC (Options.Optimistic; nil: by the function).
	single *redis.Client
	// aborts counts aborted transactions; fallbacks the chunks that went
	// through the function after MaxAborts of them (for tests).
	aborts, fallbacks atomic.Int64
	// beforeExec, when set, runs between the reads and MULTI (for tests
	// that change a watched key there).
	beforeExec func(keys []string)
}

const (
	// libName and fnName carry the version of the function's contract
	// (arguments and reply): a lander loads only its own version, with
	// REPLACE, so an older binary still running against the same server
	// keeps calling its own version, which guards alike. A change of the
	// contract takes a new name.
	libName = "ubik_land_v2"
	fnName  = "ubik_land_v2"
	// argsPerKey is the number of ARGV entries per key.
	argsPerKey = 6
)

// body guards and writes every key of one call. ARGV holds argsPerKey
// entries per key: window_start, revision, value, final, window_end,
// message key. The reply is three counts: keys landed, duplicates (equal
// pair), superseded.
//
// The server's time per key is mostly the two redis.calls, which cannot
// go; the rest is kept small: redis.call and string.byte are locals
// (they do not exist while the library loads, so they are taken in each
// call), the window starts are compared as interned strings first (equal
// in most records), an equal-length revision by one string comparison,
// and the reply is three integers, not one a key (8 to 15% less server
// CPU a record than the previous version; bench/README.md).
const body = `
local function cmpdec(a, b)
  local an = string.byte(a, 1) == 45
  local bn = string.byte(b, 1) == 45
  if an ~= bn then
    if an then return -1 else return 1 end
  end
  local c = 0
  if #a ~= #b then
    if #a < #b then c = -1 else c = 1 end
  elseif a ~= b then
    if a < b then c = -1 else c = 1 end
  end
  if an then c = -c end
  return c
end
local function land(keys, argv)
  local call, byte = redis.call, string.byte
  local landed, dup, sup = 0, 0, 0
  local o = 0
  for i = 1, #keys do
    local k = keys[i]
    local ws, rev = argv[o + 1], argv[o + 2]
    local cur = call('HMGET', k, 'window_start', 'revision')
    local cw, cr = cur[1], cur[2]
    local c = 1
    if cw and cr then
      if cw ~= ws then
        c = cmpdec(ws, cw)
      elseif #rev ~= #cr or byte(rev, 1) == 45 or byte(cr, 1) == 45 then
        c = cmpdec(rev, cr)
      elseif rev == cr then
        c = 0
      elseif rev < cr then
        c = -1
      end
    end
    if c > 0 then
      call('HSET', k, 'value', argv[o + 3], 'window_start', ws, 'revision', rev,
        'final', argv[o + 4], 'window_end', argv[o + 5], 'key', argv[o + 6])
      landed = landed + 1
    elseif c == 0 then
      dup = dup + 1
    else
      sup = sup + 1
    end
    o = o + 6
  end
  return {landed, dup, sup}
end
`

// library is the Redis 7 function library; script the EVAL form of it.
const (
	library = "#!lua name=" + libName + "\n" + body +
		"redis.register_function('" + fnName + "', land)\n"
	script = body + "return land(KEYS, ARGV)\n"
)

// New validates opts and loads the function into the server.
func New(ctx context.Context, opts Options) (*Lander, error) {
	if opts.Client == nil {
		return nil, ErrNoClient
	}
	if !opts.Mode.Valid() {
		return nil, fmt.Errorf("redislander: invalid mode %v", opts.Mode)
	}
	if strings.Contains(opts.Query, land.QuerySeparator) {
		return nil, fmt.Errorf("redislander: query %q contains %q", opts.Query, land.QuerySeparator)
	}
	if opts.KeysPerCall < 0 || opts.CallsPerPipeline < 0 || opts.Pipelines < 0 || opts.MaxAborts < 0 {
		return nil, errors.New("redislander: KeysPerCall, CallsPerPipeline, Pipelines and MaxAborts must not be negative")
	}
	if opts.MaxAborts == 0 {
		opts.MaxAborts = 3
	}
	if opts.Pipelines == 0 {
		opts.Pipelines = 4
	}
	if opts.KeysPerCall == 0 {
		opts.KeysPerCall = 64
	}
	if opts.CallsPerPipeline == 0 {
		opts.CallsPerPipeline = 32
	}
	l := &Lander{o: opts}
	if _, ok := opts.Client.(*redis.ClusterClient); ok {
		l.cluster = true
		l.o.KeysPerCall = 1
	}
	if c, ok := opts.Client.(*redis.Client); ok && opts.Optimistic {
		l.single = c
	}
	if err := l.load(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// load installs the function, or the script where functions are missing.
func (l *Lander) load(ctx context.Context) error {
	err := l.o.Client.FunctionLoadReplace(ctx, library).Err()
	if err == nil {
		l.useFn.Store(true)
		return nil
	}
	if !isUnknownCommand(err) {
		return fmt.Errorf("redislander: FUNCTION LOAD: %w", err)
	}
	sha, err := l.o.Client.ScriptLoad(ctx, script).Result()
	if err != nil {
		return fmt.Errorf("redislander: SCRIPT LOAD: %w", err)
	}
	l.sha = sha
	l.useFn.Store(false)
	return nil
}

func isUnknownCommand(err error) bool {
	s := err.Error()
	return strings.Contains(s, "unknown command") || strings.Contains(s, "unknown subcommand")
}

// lost reports an error that means the server forgot the function or
// script. The reply is wrapped (by the pipeline and by the pool), so it is
// found anywhere in the text.
func lost(err error) bool {
	s := err.Error()
	return strings.Contains(s, "NOSCRIPT") || strings.Contains(s, "Function not found") ||
		strings.Contains(s, "function not found")
}

// Mode implements land.Lander.
func (l *Lander) Mode() land.Mode { return l.o.Mode }

// Key returns the Redis key of ref.
func (l *Lander) Key(ref land.Ref) string {
	return string(l.appendKey(make([]byte, 0, len(l.o.Prefix)+len(ref.Query)+len(ref.Group)+24), ref))
}

// appendKey appends the Redis key of ref to b.
func (l *Lander) appendKey(b []byte, ref land.Ref) []byte {
	b = append(b, l.o.Prefix...)
	b = append(b, ref.Query...)
	b = append(b, land.QuerySeparator...)
	b = append(b, ref.Group...)
	if l.o.Mode == land.History {
		b = append(b, land.QuerySeparator...)
		b = strconv.AppendInt(b, ref.WindowStart, 10)
	}
	return b
}

// Land implements land.Lander.
func (l *Lander) Land(ctx context.Context, recs []changelog.Record) (land.Result, error) {
	if l.closed.Load() {
		return land.Result{}, land.ErrClosed
	}
	items, res, err := land.PrepareBatch(l.o.Mode, l.o.Query, recs)
	if err != nil {
		return land.Result{}, err
	}
	r, err := l.write(ctx, items)
	if err != nil && lost(err) {
		// The server restarted without persistence: reload and go again
		// (the guard makes the repeat harmless).
		if lerr := l.load(ctx); lerr != nil {
			return land.Result{}, configErr(lerr)
		}
		r, err = l.write(ctx, items)
	}
	if err != nil {
		return land.Result{}, configErr(err)
	}
	return res.Add(r), nil
}

func (l *Lander) write(ctx context.Context, items []land.Item) (land.Result, error) {
	return pool.Run(ctx, len(items), l.o.KeysPerCall*l.o.CallsPerPipeline, l.o.Pipelines, "redislander: keys",
		func(ctx context.Context, lo, hi int) (land.Result, error) {
			if l.single != nil {
				return l.optimistic(ctx, items[lo:hi])
			}
			return l.pipeline(ctx, items[lo:hi])
		})
}

// optimistic lands chunk on one connection, KeysPerCall keys a
// transaction: WATCH the keys and HMGET their stored pairs, compare as the
// function does, then MULTI, HSET of the keys whose record is past the
// stored pair, EXEC. The round trips chain: each carries one group's
// MULTI..EXEC and the next group's WATCH and reads, so a chunk costs about
// one round trip a group. A group whose EXEC aborted (a watched key changed
// after its WATCH: another writer) is read and compared again; after
// MaxAborts aborts it goes through the function, which cannot abort.
//
// A transaction's keys are few on purpose: WATCH checks each key against
// the connection's watched keys one by one, so its cost grows with the
// square of the keys watched at once.
func (l *Lander) optimistic(ctx context.Context, chunk []land.Item) (land.Result, error) {
	type group struct{ lo, hi, aborts int }
	per := l.o.KeysPerCall
	keys := make([]string, len(chunk))
	for i, it := range chunk {
		keys[i] = l.Key(it.Ref)
	}
	queue := make([]group, 0, (len(chunk)+per-1)/per)
	for lo := 0; lo < len(chunk); lo += per {
		queue = append(queue, group{lo: lo, hi: min(lo+per, len(chunk))})
	}
	conn := l.single.Conn()
	defer conn.Close()
	watched := false
	defer func() {
		if watched {
			// Leave no watch on a pooled connection; a broken connection
			// fails this and is not reused.
			conn.Do(context.WithoutCancel(ctx), "UNWATCH")
		}
	}()
	// read queues g's WATCH and reads on pipe.
	read := func(pipe redis.Pipeliner, g group) []*redis.SliceCmd {
		watch := make([]any, 1, 1+g.hi-g.lo)
		watch[0] = "WATCH"
		for _, k := range keys[g.lo:g.hi] {
			watch = append(watch, k)
		}
		pipe.Do(ctx, watch...)
		reads := make([]*redis.SliceCmd, g.hi-g.lo)
		for i, k := range keys[g.lo:g.hi] {
			reads[i] = pipe.HMGet(ctx, k, "window_start", "revision")
		}
		return reads
	}
	var (
		res      land.Result
		fallback []land.Item
	)
	cur := queue[0]
	queue = queue[1:]
	pipe := conn.Pipeline()
	reads := read(pipe, cur)
	watched = true
	cmds, err := pipe.Exec(ctx)
	if err := pipelineErr(cmds, err, nil); err != nil {
		return land.Result{}, err
	}
	for {
		// Compare cur's records with what its reads found.
		var gres land.Result
		forward := make([]int, 0, cur.hi-cur.lo)
		for j, rd := range reads {
			i := cur.lo + j
			c, err := compareStored(chunk[i], keys[i], rd.Val())
			if err != nil {
				return land.Result{}, err
			}
			switch c {
			case 1:
				forward = append(forward, i)
			case 0:
				gres.Duplicate++
			default:
				gres.Superseded++
			}
		}
		if l.beforeExec != nil {
			l.beforeExec(keys[cur.lo:cur.hi])
		}
		pipe := conn.Pipeline()
		var exec *redis.Cmd
		if len(forward) > 0 {
			pipe.Do(ctx, "MULTI")
			for _, i := range forward {
				it := chunk[i]
				final := "0"
				if it.Final {
					final = "1"
				}
				pipe.Do(ctx, "HSET", keys[i], "value", it.Value,
					"window_start", strconv.FormatInt(it.Version.WindowStart, 10),
					"revision", strconv.FormatUint(it.Version.Revision, 10),
					"final", final, "window_end", strconv.FormatInt(it.WindowEnd, 10), "key", it.Key)
			}
			exec = pipe.Do(ctx, "EXEC")
		} else {
			// Nothing to write: the reads are the answer (stored pairs
			// only grow).
			pipe.Do(ctx, "UNWATCH")
		}
		var next group
		more := len(queue) > 0
		if more {
			next, queue = queue[0], queue[1:]
			reads = read(pipe, next)
		}
		watched = true
		cmds, err := pipe.Exec(ctx)
		if err := pipelineErr(cmds, err, exec); err != nil {
			return land.Result{}, err
		}
		switch {
		case exec != nil && errors.Is(exec.Err(), redis.Nil):
			// Aborted: nothing of cur was written.
			l.aborts.Add(1)
			if cur.aborts++; cur.aborts < l.o.MaxAborts {
				queue = append(queue, cur)
			} else {
				fallback = append(fallback, chunk[cur.lo:cur.hi]...)
			}
		case exec != nil:
			if err := execErr(exec, len(forward)); err != nil {
				return land.Result{}, err
			}
			gres.Landed += len(forward)
			res = res.Add(gres)
		default:
			res = res.Add(gres)
		}
		if !more {
			if len(queue) > 0 {
				// Only aborted groups are left: read the first again.
				cur, queue = queue[0], queue[1:]
				pipe := conn.Pipeline()
				reads = read(pipe, cur)
				cmds, err := pipe.Exec(ctx)
				if err := pipelineErr(cmds, err, nil); err != nil {
					return land.Result{}, err
				}
				continue
			}
			watched = false
			break
		}
		cur = next
	}
	if len(fallback) > 0 {
		l.fallbacks.Add(1)
		r, err := l.pipeline(ctx, fallback)
		if err != nil {
			return land.Result{}, err
		}
		res = res.Add(r)
	}
	return res, nil
}

// pipelineErr is the first failure of a pipeline's commands, other than
// the nil reply of exec (an aborted transaction).
func pipelineErr(cmds []redis.Cmder, err error, exec *redis.Cmd) error {
	if err == nil {
		return nil
	}
	for _, c := range cmds {
		if e := c.Err(); e != nil && !(c == redis.Cmder(exec) && errors.Is(e, redis.Nil)) {
			return fmt.Errorf("redislander: %s: %w", c.Name(), e)
		}
	}
	return nil
}

// execErr checks the reply of an EXEC that ran n HSETs.
func execErr(exec *redis.Cmd, n int) error {
	v, err := exec.Slice()
	if err != nil {
		return fmt.Errorf("redislander: EXEC: %w", err)
	}
	if len(v) != n {
		return fmt.Errorf("%w: EXEC of %d HSETs: %d replies", ErrReply, n, len(v))
	}
	for _, r := range v {
		if e, ok := r.(error); ok {
			return fmt.Errorf("redislander: HSET in EXEC: %w", e)
		}
	}
	return nil
}

// compareStored compares it's (window_start, revision) with the reply of
// HMGET key window_start revision, as the function does: 1 when the
// record is past the stored pair or no pair is stored, 0 when equal, -1
// when behind.
func compareStored(it land.Item, key string, cur []any) (int, error) {
	if len(cur) != 2 {
		return 0, fmt.Errorf("%w: HMGET %s: %d fields", ErrReply, key, len(cur))
	}
	if cur[0] == nil || cur[1] == nil {
		return 1, nil
	}
	ws, wok := cur[0].(string)
	rev, rok := cur[1].(string)
	if !wok || !rok {
		return 0, fmt.Errorf("%w: HMGET %s: %T, %T", ErrReply, key, cur[0], cur[1])
	}
	c := cmpdec(strconv.FormatInt(it.Version.WindowStart, 10), ws)
	if c == 0 {
		c = cmpdec(strconv.FormatUint(it.Version.Revision, 10), rev)
	}
	return c, nil
}

// cmpdec compares two canonical decimal integers exactly as the function's
// cmpdec does (sign, then length, then bytes): -1, 0 or 1.
func cmpdec(a, b string) int {
	an := len(a) > 0 && a[0] == '-'
	bn := len(b) > 0 && b[0] == '-'
	if an != bn {
		if an {
			return -1
		}
		return 1
	}
	c := 0
	switch {
	case len(a) != len(b):
		if len(a) < len(b) {
			c = -1
		} else {
			c = 1
		}
	case a != b:
		if a < b {
			c = -1
		} else {
			c = 1
		}
	}
	if an {
		c = -c
	}
	return c
}

// pipeline lands chunk in one round trip.
//
// The client's CPU competes with the server's on a small machine, so a
// chunk costs a handful of allocations, not a dozen a key: its keys are
// cut from one string, and every argument is a pointer (to a key, or to
// the item's own fields), which an interface holds without allocating;
// go-redis writes *int64, *uint64 and *bool (1/0) in decimal itself and
// takes the value and message key through bytesArg. The bytes sent are
// those of FCall with formatted strings.
func (l *Lander) pipeline(ctx context.Context, chunk []land.Item) (land.Result, error) {
	var res land.Result
	per := l.o.KeysPerCall
	useFn := l.useFn.Load()
	keys := l.keys(chunk)
	calls := (len(chunk) + per - 1) / per
	// One backing array for every call's arguments: 3 a call and 1 +
	// argsPerKey a key.
	all := make([]any, 0, 3*calls+(1+argsPerKey)*len(chunk))
	pipe := l.o.Client.Pipeline()
	cmds := make([]*redis.IntSliceCmd, 0, calls)
	for i := 0; i < len(chunk); i += per {
		hi := min(i+per, len(chunk))
		lo := len(all)
		if useFn {
			all = append(all, "fcall", fnName, hi-i)
		} else {
			all = append(all, "evalsha", l.sha, hi-i)
		}
		for j := i; j < hi; j++ {
			all = append(all, &keys[j])
		}
		for j := i; j < hi; j++ {
			it := &chunk[j]
			all = append(all, &it.Version.WindowStart, &it.Version.Revision,
				(*bytesArg)(&it.Value), &it.Final, &it.WindowEnd, (*bytesArg)(&it.Key))
		}
		cmd := redis.NewIntSliceCmd(ctx, all[lo:len(all):len(all)]...)
		cmd.SetFirstKeyPos(3)
		if err := pipe.Process(ctx, cmd); err != nil {
			return land.Result{}, fmt.Errorf("redislander: %w", err)
		}
		cmds = append(cmds, cmd)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return land.Result{}, fmt.Errorf("redislander: %w", err)
	}
	for i, c := range cmds {
		counts, err := c.Result()
		if err != nil {
			return land.Result{}, fmt.Errorf("redislander: %w", err)
		}
		want := min(per, len(chunk)-i*per)
		if len(counts) != 3 || counts[0] < 0 || counts[1] < 0 || counts[2] < 0 ||
			counts[0]+counts[1]+counts[2] != int64(want) {
			return land.Result{}, fmt.Errorf("%w: counts %v for %d keys", ErrReply, counts, want)
		}
		res.Landed += int(counts[0])
		res.Duplicate += int(counts[1])
		res.Superseded += int(counts[2])
	}
	return res, nil
}

// keys returns the Redis keys of chunk (as Key does), cut from one string.
func (l *Lander) keys(chunk []land.Item) []string {
	n := 0
	for i := range chunk {
		n += len(l.o.Prefix) + len(chunk[i].Query) + len(land.QuerySeparator) + len(chunk[i].Group)
		if l.o.Mode == land.History {
			n += len(land.QuerySeparator) + 20
		}
	}
	b := make([]byte, 0, n)
	ends := make([]int, len(chunk))
	for i := range chunk {
		b = l.appendKey(b, chunk[i].Ref)
		ends[i] = len(b)
	}
	s := string(b)
	keys := make([]string, len(chunk))
	lo := 0
	for i, hi := range ends {
		keys[i], lo = s[lo:hi], hi
	}
	return keys
}

// bytesArg passes a []byte field to go-redis by pointer: an interface
// holds a pointer without allocating, and go-redis writes a
// BinaryMarshaler's bytes as they are.
type bytesArg []byte

// MarshalBinary implements encoding.BinaryMarshaler.
func (b *bytesArg) MarshalBinary() ([]byte, error) { return *b, nil }

// Get implements land.Lander.
func (l *Lander) Get(ctx context.Context, ref land.Ref) (land.Stored, error) {
	key := l.Key(ref)
	vals, err := l.o.Client.HMGet(ctx, key, "value", "window_start", "revision", "final", "window_end", "key").Result()
	if err != nil {
		return land.Stored{}, fmt.Errorf("redislander: HMGET %s: %w", key, err)
	}
	if vals[0] == nil {
		return land.Stored{}, fmt.Errorf("%w: %s", land.ErrNotFound, key)
	}
	str := func(i int) (string, error) {
		s, ok := vals[i].(string)
		if !ok {
			return "", fmt.Errorf("%w: field %d of %s is %T", ErrReply, i, key, vals[i])
		}
		return s, nil
	}
	var st land.Stored
	var s [6]string
	for i := range s {
		if s[i], err = str(i); err != nil {
			return land.Stored{}, err
		}
	}
	st.Value = []byte(s[0])
	if st.Version.WindowStart, err = strconv.ParseInt(s[1], 10, 64); err != nil {
		return land.Stored{}, fmt.Errorf("%w: window_start %q of %s", ErrReply, s[1], key)
	}
	if st.Version.Revision, err = strconv.ParseUint(s[2], 10, 64); err != nil {
		return land.Stored{}, fmt.Errorf("%w: revision %q of %s", ErrReply, s[2], key)
	}
	st.Final = s[3] == "1"
	if st.WindowEnd, err = strconv.ParseInt(s[4], 10, 64); err != nil {
		return land.Stored{}, fmt.Errorf("%w: window_end %q of %s", ErrReply, s[4], key)
	}
	st.Key = []byte(s[5])
	return st, nil
}

// Close implements land.Lander; it leaves the client open.
func (l *Lander) Close() error {
	l.closed.Store(true)
	return nil
}
