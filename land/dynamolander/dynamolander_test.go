package dynamolander

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
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
	})
}
