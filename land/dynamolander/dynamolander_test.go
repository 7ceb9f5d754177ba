package dynamolander

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/landtest"
)

func client(t testing.TB) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(testenv.RequireDynamoDB(t)),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

func TestConformance(t *testing.T) {
	c := client(t)
	landtest.Run(t, landtest.Harness{
		Open: func(t testing.TB, mode land.Mode, ns string) land.Lander {
			table := ns + "_" + mode.String()
			l, err := New(context.Background(), Options{Client: c, Mode: mode, Table: table, Concurrency: 4})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &table}) })
			return l
		},
		ExactValue: true,
		// dynalite serves about a thousand requests a second: trials stay
		// 10000, each a little smaller.
		Windows: 2, Revisions: 2, MaxCopies: 2,
		Refusals: []landtest.Refusal{
			{Name: "partition key of 2049 bytes", Make: func(g changelog.Record) changelog.Record {
				return withPK(g, MaxPartitionKey+1)
			}, Reason: "2048"},
			{Name: "item over 400 KB", Make: func(g changelog.Record) changelog.Record {
				r := g.Clone()
				r.Value = []byte(`{"pad":"` + strings.Repeat("x", MaxItem) + `"}`)
				return r
			}, Reason: "400 KB"},
			{Name: "value not UTF-8", Make: func(g changelog.Record) changelog.Record {
				r := g.Clone()
				r.Value = []byte("{\"s\":\"\xff\"}")
				return r
			}, Reason: "UTF-8"},
		},
	})
}

// withPK returns a latest-mode record like g whose partition key (query,
// ":" and group) has n bytes.
func withPK(g changelog.Record, n int) changelog.Record {
	q := g.Meta.Query
	pad := n - len(q) - 1 - len(`[""]`)
	return landtest.Record(land.Latest, q, strings.Repeat("p", pad), landtest.Base(), 1, false)
}

// TestLimits: a partition key of exactly 2048 bytes and an item of exactly
// 400 KB as the lander counts it land on the server; one byte more of
// either is refused before sending, naming the limit.
func TestLimits(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	table := testenv.Name(t, "dynlimits")
	l, err := New(ctx, Options{Client: c, Mode: land.Latest, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &table}) })
	good := landtest.Record(land.Latest, "q", "g", landtest.Base(), 1, false)
	pk := withPK(good, MaxPartitionKey)
	item := good.Clone()
	item.Value = []byte(`{"pad":""}`)
	it, err := land.Prepare(land.Latest, "", item)
	if err != nil {
		t.Fatal(err)
	}
	item.Value = []byte(`{"pad":"` + strings.Repeat("x", MaxItem-l.itemSize(it)) + `"}`)
	for name, r := range map[string]changelog.Record{"partition key at 2048": pk, "item at 400 KB": item} {
		if res, err := l.Land(ctx, []changelog.Record{r}); err != nil || res.Landed != 1 {
			t.Errorf("%s: Land = %+v, %v; want it landed", name, res, err)
		}
	}
	pk = withPK(good, MaxPartitionKey+1)
	item.Value = append([]byte(`{"pad":"x`), item.Value[len(`{"pad":"`):]...)
	for name, r := range map[string]changelog.Record{"partition key at 2049": pk, "item at 400 KB + 1": item} {
		_, err := l.Land(ctx, []changelog.Record{r})
		var re *land.RecordError
		if !errors.As(err, &re) || !errors.Is(err, land.ErrRefused) || !strings.Contains(err.Error(), "limit") {
			t.Errorf("%s: Land = %v; want a refusal naming the limit", name, err)
		}
	}
}
