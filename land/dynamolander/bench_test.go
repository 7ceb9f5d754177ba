package dynamolander

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"context"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/landtest"
)

// BenchmarkLand: go test -bench . -benchtime=20000x ./land/dynamolander
// (dynalite is far from DynamoDB's speed: a smaller run).
func BenchmarkLand(b *testing.B) {
	c := client(b)
	table := landtest.NS("bench")
	l, err := New(context.Background(), Options{Client: c, Mode: land.Latest, Table: table, Concurrency: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &table})
	landtest.BenchLand(b, l, 10_000, 1000)
}

// BenchmarkPutCeiling is the server's own ceiling for the same items: an
// unconditional PutItem per record at the same concurrency.
func BenchmarkPutCeiling(b *testing.B) {
	c := client(b)
	table := landtest.NS("bench")
	l, err := New(context.Background(), Options{Client: c, Mode: land.Latest, Table: table})
	if err != nil {
		b.Fatal(err)
	}
	defer c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &table})
	recs := landtest.BenchRecords(b.N, 10_000)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(recs) {
					return
				}
				it, _ := land.Prepare(land.Latest, "", recs[i])
				item := l.Key(it.Ref)
				item[attrValue] = &types.AttributeValueMemberS{Value: string(it.Value)}
				item[attrWS] = &types.AttributeValueMemberN{Value: strconv.FormatInt(it.Version.WindowStart, 10)}
				item[attrRev] = &types.AttributeValueMemberN{Value: strconv.FormatUint(it.Version.Revision, 10)}
				if _, err := c.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}
