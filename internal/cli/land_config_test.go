package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/kafkasrc"
	"github.com/ubiksql/ubik/land/landtest"
)

// TestLandConfigError: a store that refuses the lander for its
// configuration (a Redis ACL user without FCALL and HSET) stops ubik land
// within seconds with exit status 1, naming Redis's reason and what to
// check, where it retried forever; nothing is committed, so the same group
// with a user that may write lands every record.
func TestLandConfigError(t *testing.T) {
	addr := testenv.RequireRedis(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateTopic("totals", 1, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var krs []*kgo.Record
	for i, g := range []string{"a", "b", "c"} {
		krs = append(krs, kafkasrc.ToKafka("totals", landtest.Record(land.Latest, "totals", g, landtest.Base(), uint64(i+1), false)))
	}
	if err := cl.ProduceSync(context.Background(), krs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(&redis.Options{Addr: addr, DB: 13}) // a database of few keys: the cleanup reads them all
	defer admin.Close()
	user := testenv.Name(t, "ubik")
	if err := admin.Do(context.Background(), "ACL", "SETUSER", user, "reset", "on", ">pw", "~*", "+@all", "-fcall", "-hset").Err(); err != nil {
		t.Fatal(err)
	}
	defer admin.Do(context.Background(), "ACL", "DELUSER", user)
	prefix := testenv.Name(t, "cfg") + "/"
	defer func() {
		keys, _ := admin.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			admin.Del(context.Background(), keys...)
		}
	}()
	lander := func(cred string) (int, string, time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		env, errb := testEnv()
		start := time.Now()
		code := Main(ctx, env, []string{"land", "--from", "kafka://" + c.ListenAddrs()[0] + "/totals",
			"--to", "redis://" + cred + addr + "/13?prefix=" + prefix, "--mode", "latest", "--group", "g",
			"--until-caught-up", "--stats-interval", "0"})
		if ctx.Err() != nil {
			t.Fatalf("ubik land did not exit within 30s: %s", errb)
		}
		return code, errb.String(), time.Since(start)
	}
	code, errs, took := lander(user + ":pw@")
	if code != 1 || !strings.Contains(errs, "NOPERM") || !strings.Contains(errs, "check: the ACL user's permissions") ||
		!strings.Contains(errs, "landed 0,") || took > landtest.ConfigStop {
		t.Fatalf("as a user without FCALL: exit %d after %v, want 1 within %v naming NOPERM and the ACL:\n%s",
			code, took.Round(time.Millisecond), landtest.ConfigStop, errs)
	}
	t.Logf("stopped in %v: %s", took.Round(time.Millisecond), errs)
	if code, errs, _ := lander(""); code != 0 || !strings.Contains(errs, "landed 3,") {
		t.Fatalf("as the default user, same group: exit %d, want 0 with 3 landed:\n%s", code, errs)
	}
}
