package dynamolander

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/landtest"
)

// TestConfigErrorStops: a table that is not there stops land.Run within
// seconds, naming DynamoDB's reason and what to check, where it was
// retried forever: a table the lander was told not to create, and one
// deleted under the lander; and a request without credentials (dynalite
// accepts any key it is given, so a wrong one cannot be tested here: it
// refuses only a request that carries none).
func TestConfigErrorStops(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	t.Run("NotCreated", func(t *testing.T) {
		table := testenv.Name(t, "dyncfg")
		l, err := New(ctx, Options{Client: c, Mode: land.Latest, Table: table, NoCreate: true})
		if err != nil {
			t.Fatal(err)
		}
		landtest.RequireConfigStop(t, l, "ResourceNotFoundException", table, "must exist")
	})
	t.Run("Deleted", func(t *testing.T) {
		table := testenv.Name(t, "dyncfg")
		l, err := New(ctx, Options{Client: c, Mode: land.History, Table: table})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &table}); err != nil {
			t.Fatal(err)
		}
		w := dynamodb.NewTableNotExistsWaiter(c, func(o *dynamodb.TableNotExistsWaiterOptions) {
			o.MinDelay, o.MaxDelay = createPoll, createPoll
		})
		if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &table}, createWait); err != nil {
			t.Fatal(err)
		}
		landtest.RequireConfigStop(t, l, "ResourceNotFoundException", table)
	})
	t.Run("NoCredentials", func(t *testing.T) {
		table := testenv.Name(t, "dyncfg")
		if _, err := New(ctx, Options{Client: c, Mode: land.Latest, Table: table}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &table}) })
		anon := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(testenv.RequireDynamoDB(t)),
			Credentials: aws.AnonymousCredentials{}})
		l, err := New(ctx, Options{Client: anon, Mode: land.Latest, Table: table, NoCreate: true})
		if err != nil {
			t.Fatal(err)
		}
		landtest.RequireConfigStop(t, l, "MissingAuthenticationTokenException", "credentials")
	})
}

// TestConfigErrCodes: the codes of a configuration are ErrConfig;
// throttling and an internal error are not.
func TestConfigErrCodes(t *testing.T) {
	l := &Lander{o: Options{Table: "t"}}
	for code, want := range map[string]bool{"ResourceNotFoundException": true, "AccessDeniedException": true,
		"UnrecognizedClientException": true, "InvalidSignatureException": true, "MissingAuthenticationTokenException": true,
		"ExpiredTokenException": true, "ProvisionedThroughputExceededException": false, "ThrottlingException": false,
		"InternalServerError": false, "ServiceUnavailable": false, "RequestLimitExceeded": false} {
		err := l.configErr(&smithy.GenericAPIError{Code: code, Message: "m"})
		if got := errors.Is(err, land.ErrConfig); got != want {
			t.Errorf("%s: configuration error %v, want %v (%v)", code, got, want, err)
		}
	}
	if l.configErr(errors.New("dial tcp: connection refused")) != nil {
		t.Error("a refused connection is a configuration error")
	}
}
