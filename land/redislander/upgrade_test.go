package redislander

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/landtest"
)

// v1Library is the previous version of the function, as an older binary
// loads it: same guard, one code a key in the reply.
const v1Library = "#!lua name=ubik_land_v1\n" + v1Body + "redis.register_function('ubik_land_v1', land)\n"

const v1Body = `
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
  local out = {}
  for i = 1, #keys do
    local o = (i - 1) * 6
    local ws, rev = argv[o + 1], argv[o + 2]
    local cur = redis.call('HMGET', keys[i], 'window_start', 'revision')
    local c = 1
    if cur[1] and cur[2] then
      c = cmpdec(ws, cur[1])
      if c == 0 then c = cmpdec(rev, cur[2]) end
    end
    if c > 0 then
      redis.call('HSET', keys[i], 'value', argv[o + 3], 'window_start', ws, 'revision', rev,
        'final', argv[o + 4], 'window_end', argv[o + 5], 'key', argv[o + 6])
    end
    out[i] = c
  end
  return out
end
`

// v1Land lands items as an older binary does: FCALL ubik_land_v1, one code
// a key.
func v1Land(ctx context.Context, c redis.UniversalClient, l *Lander, items []land.Item) (land.Result, error) {
	args := []any{"fcall", "ubik_land_v1", len(items)}
	for _, it := range items {
		args = append(args, l.Key(it.Ref))
	}
	for _, it := range items {
		f := "0"
		if it.Final {
			f = "1"
		}
		args = append(args, it.Version.WindowStart, it.Version.Revision, it.Value, f, it.WindowEnd, it.Key)
	}
	codes, err := c.Do(ctx, args...).Int64Slice()
	if err != nil {
		return land.Result{}, err
	}
	if len(codes) != len(items) {
		return land.Result{}, fmt.Errorf("%d codes for %d keys", len(codes), len(items))
	}
	var r land.Result
	for _, code := range codes {
		switch code {
		case 1:
			r.Landed++
		case 0:
			r.Duplicate++
		case -1:
			r.Superseded++
		default:
			return land.Result{}, fmt.Errorf("code %d", code)
		}
	}
	return r, nil
}

// TestUpgrade: a server that holds the previous version of the function,
// still called by an older binary, gets the new version beside it; both
// guard the same keys at once, every record counted once and the newest
// revision of every key stored; losing the new version reloads it, and
// the old one is left as it was.
func TestUpgrade(t *testing.T) {
	ctx := context.Background()
	open, _ := privateServer(t)
	ns := landtest.NS("upgrade")
	probe := open(t, land.Latest, ns).(*Lander)
	c := probe.o.Client
	if err := c.FunctionDelete(ctx, libName).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.FunctionLoad(ctx, v1Library).Err(); err != nil {
		t.Fatal(err)
	}
	l := open(t, land.Latest, ns).(*Lander)
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{}).Result()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, lib := range libs {
		names = append(names, lib.Name)
	}
	if strings.Join(names, ",") != "ubik_land_v1,"+libName && strings.Join(names, ",") != libName+",ubik_land_v1" {
		t.Fatalf("libraries after the upgrade: %v", names)
	}

	const keys, revs = 50, 20
	var items []land.Item
	for rev := 1; rev <= revs; rev++ {
		for k := range keys {
			it, err := land.Prepare(land.Latest, "", landtest.Record(land.Latest, "q", fmt.Sprintf("g%d", k), time.UnixMicro(0), uint64(rev), false))
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, it)
		}
	}
	// Each writer lands every record once, in its own order; together
	// every record is seen twice.
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		total  land.Result
		errs   []error
		orders = [][]land.Item{items, make([]land.Item, len(items))}
	)
	for i, it := range items {
		orders[1][len(items)-1-i] = it
	}
	for w, order := range orders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := 0; lo < len(order); lo += 7 {
				batch := order[lo:min(lo+7, len(order))]
				var r land.Result
				var err error
				if w == 0 {
					r, err = v1Land(ctx, c, l, batch)
				} else {
					r, err = l.write(ctx, batch)
				}
				mu.Lock()
				total = total.Add(r)
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if n := total.Landed + total.Duplicate + total.Superseded; n != 2*len(items) || total.Landed < keys {
		t.Fatalf("results %+v for %d records", total, 2*len(items))
	}
	check := func() {
		t.Helper()
		for k := range keys {
			want := landtest.Record(land.Latest, "q", fmt.Sprintf("g%d", k), time.UnixMicro(0), revs, false)
			st, err := l.Get(ctx, land.Ref{Query: "q", Group: fmt.Appendf(nil, `["g%d"]`, k)})
			if err != nil || st.Version.Revision != revs || string(st.Value) != string(want.Value) {
				t.Fatalf("g%d: %+v %q, %v", k, st.Version, st.Value, err)
			}
		}
	}
	check()

	// The server loses the new version: the lander reloads it, the old
	// version still answers as before.
	if err := c.FunctionDelete(ctx, libName).Err(); err != nil {
		t.Fatal(err)
	}
	r, err := l.Land(ctx, landtest.BenchRecords(1, 1))
	if err != nil || r.Landed != 1 {
		t.Fatalf("Land after FUNCTION DELETE: %+v, %v", r, err)
	}
	if r, err := v1Land(ctx, c, l, items[:keys]); err != nil || r.Superseded != keys {
		t.Fatalf("old version after the reload: %+v, %v", r, err)
	}
	check()
}

// TestBadReply: counts that do not add up to the call's keys are an error,
// not a result.
func TestBadReply(t *testing.T) {
	ctx := context.Background()
	open, _ := privateServer(t)
	l := open(t, land.Latest, landtest.NS("badreply")).(*Lander)
	for _, reply := range []string{"{1, 0, 0}", "{3, -1, 0}", "{1, 1}", "{1, 1, 0, 0}"} {
		fake := "#!lua name=" + libName + "\nredis.register_function('" + fnName + "', function(keys, argv) return " + reply + " end)\n"
		if err := l.o.Client.FunctionLoadReplace(ctx, fake).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := l.Land(ctx, landtest.BenchRecords(2, 2))
		if !errors.Is(err, ErrReply) {
			t.Fatalf("reply %s for 2 keys: %v, want ErrReply", reply, err)
		}
	}
}
