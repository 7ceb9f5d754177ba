// Package dynamolander lands a ubik changelog into DynamoDB.
//
// The partition key "pk" is the query name, ":" and the group (the message
// key for a continuous view); in History mode the sort key "sk" is the
// window start (µs), so one Query lists a group's windows in time order.
// Each item holds value (the value bytes as a string, unchanged),
// window_start, revision, final, window_end and key (the message key).
//
// Every record is one conditional UpdateItem,
//
//	attribute_not_exists(pk) OR window_start < :ws
//	  OR (window_start = :ws AND revision <= :rev)
//
// run concurrently up to a bound. DynamoDB compares numbers exactly (38
// digits), so uint64 revisions are safe. A failed condition
// (ConditionalCheckFailedException) is a superseded record, not an error.
// An equal pair passes the condition and rewrites the same record (the
// same key and revision carry the same value): the old item, returned by
// the call, tells that duplicate from a landing, in one request.
//
// What DynamoDB cannot hold is refused (land.ErrRefused) before it is sent,
// naming the limit: a partition key over 2048 bytes, an item over 400 KB
// (attribute names and values), a string that is not UTF-8. The sort key
// is a number, so the 1024-byte sort key limit never applies. A
// ValidationException from the server refuses the record likewise. An
// error that points at the configuration (AccessDeniedException,
// UnrecognizedClientException and the other credential errors,
// ResourceNotFoundException: the table is missing) is land.ErrConfig,
// which stops land.Run; throttling and a store out of reach are retried.
package dynamolander

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/internal/pool"
)

// Options configure a Lander.
type Options struct {
	// Client is the host's DynamoDB client.
	Client *dynamodb.Client
	// Mode is the identity rule (required).
	Mode land.Mode
	// Query, when set, is the namespace of records that carry no query
	// name, and the only query this lander accepts.
	Query string
	// Table is the table name (required). It is created (on-demand
	// billing) when missing unless NoCreate is set.
	Table    string
	NoCreate bool
	// Concurrency bounds the UpdateItem calls in flight (default 16).
	Concurrency int
}

// Lander lands into DynamoDB. It is safe for concurrent use.
type Lander struct {
	o      Options
	closed atomic.Bool
}

// Attribute names.
const (
	attrPK, attrSK             = "pk", "sk"
	attrValue, attrWS, attrRev = "value", "window_start", "revision"
	attrFinal, attrWE, attrKey = "final", "window_end", "key"
	condition                  = "attribute_not_exists(pk) OR #ws < :ws OR (#ws = :ws AND #rev <= :rev)"
	update                     = "SET #v = :v, #ws = :ws, #rev = :rev, #f = :f, #we = :we, #k = :k"
	maxTableName, minTableName = 255, 3
	createPoll, createWait     = 200 * time.Millisecond, 2 * time.Minute
)

var names = map[string]string{"#v": attrValue, "#ws": attrWS, "#rev": attrRev, "#f": attrFinal, "#we": attrWE, "#k": attrKey}

// New validates opts and creates the table when missing.
func New(ctx context.Context, opts Options) (*Lander, error) {
	switch {
	case opts.Client == nil:
		return nil, ErrNoClient
	case !opts.Mode.Valid():
		return nil, fmt.Errorf("dynamolander: invalid mode %v", opts.Mode)
	case len(opts.Table) < minTableName || len(opts.Table) > maxTableName:
		return nil, fmt.Errorf("dynamolander: table name %q must have 3 to 255 characters", opts.Table)
	case opts.Concurrency < 0:
		return nil, fmt.Errorf("dynamolander: Concurrency %d is negative", opts.Concurrency)
	case strings.Contains(opts.Query, land.QuerySeparator):
		return nil, fmt.Errorf("dynamolander: query %q contains %q", opts.Query, land.QuerySeparator)
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = 16
	}
	l := &Lander{o: opts}
	if !opts.NoCreate {
		if err := l.create(ctx); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (l *Lander) create(ctx context.Context) error {
	c := l.o.Client
	_, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &l.o.Table})
	var nf *types.ResourceNotFoundException
	if err == nil {
		return nil
	}
	if !errors.As(err, &nf) {
		return fmt.Errorf("dynamolander: describing table %s: %w", l.o.Table, err)
	}
	in := &dynamodb.CreateTableInput{
		TableName:            &l.o.Table,
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash}},
	}
	if l.o.Mode == land.History {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(attrSK), AttributeType: types.ScalarAttributeTypeN})
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange})
	}
	if _, err := c.CreateTable(ctx, in); err != nil {
		var inUse *types.ResourceInUseException
		if !errors.As(err, &inUse) {
			return fmt.Errorf("dynamolander: creating table %s: %w", l.o.Table, err)
		}
	}
	w := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = createPoll })
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &l.o.Table}, createWait); err != nil {
		return fmt.Errorf("dynamolander: waiting for table %s: %w", l.o.Table, err)
	}
	return nil
}

// Mode implements land.Lander.
func (l *Lander) Mode() land.Mode { return l.o.Mode }

// Key returns the primary key of ref.
func (l *Lander) Key(ref land.Ref) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: ref.Query + land.QuerySeparator + string(ref.Group)},
	}
	if l.o.Mode == land.History {
		k[attrSK] = &types.AttributeValueMemberN{Value: strconv.FormatInt(ref.WindowStart, 10)}
	}
	return k
}

// Land implements land.Lander.
func (l *Lander) Land(ctx context.Context, recs []changelog.Record) (land.Result, error) {
	if l.closed.Load() {
		return land.Result{}, land.ErrClosed
	}
	items, res, err := land.PrepareChecked(l.o.Mode, l.o.Query, recs, l.check)
	if err != nil {
		return land.Result{}, err
	}
	r, err := pool.Run(ctx, len(items), 1, l.o.Concurrency, "dynamolander: records",
		func(ctx context.Context, i, _ int) (land.Result, error) { return l.put(ctx, items[i]) })
	if err != nil {
		return land.Result{}, err
	}
	return res.Add(r), nil
}

func (l *Lander) put(ctx context.Context, it land.Item) (land.Result, error) {
	ws := strconv.FormatInt(it.Version.WindowStart, 10)
	rev := strconv.FormatUint(it.Version.Revision, 10)
	out, err := l.o.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &l.o.Table,
		ReturnValues:             types.ReturnValueAllOld,
		Key:                      l.Key(it.Ref),
		UpdateExpression:         aws.String(update),
		ConditionExpression:      aws.String(condition),
		ExpressionAttributeNames: names,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":v":   &types.AttributeValueMemberS{Value: string(it.Value)},
			":ws":  &types.AttributeValueMemberN{Value: ws},
			":rev": &types.AttributeValueMemberN{Value: rev},
			":f":   &types.AttributeValueMemberBOOL{Value: it.Final},
			":we":  &types.AttributeValueMemberN{Value: strconv.FormatInt(it.WindowEnd, 10)},
			":k":   &types.AttributeValueMemberS{Value: string(it.Key)},
		},
	})
	if err == nil {
		// The condition admits an equal pair (rewriting the same record);
		// the old item tells that no-op from a landing.
		if len(out.Attributes) > 0 {
			if old, derr := decodeItem(out.Attributes); derr == nil && old.Version == it.Version {
				return land.Result{Duplicate: 1}, nil
			}
		}
		return land.Result{Landed: 1}, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return land.Result{Superseded: 1}, nil
	}
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "ValidationException" {
		return land.Result{}, fmt.Errorf("%w: DynamoDB refuses %v in %s: %w", land.ErrRefused, it.Ref, l.o.Table, err)
	}
	if cerr := l.configErr(err); cerr != nil {
		return land.Result{}, cerr
	}
	return land.Result{}, fmt.Errorf("dynamolander: UpdateItem %v in %s: %w", it.Ref, l.o.Table, err)
}

// DynamoDB's limits, in bytes.
const (
	MaxPartitionKey = 2048
	MaxItem         = 400 << 10
)

// check refuses an item DynamoDB cannot hold, naming the limit.
func (l *Lander) check(it land.Item) error {
	pk := len(it.Query) + len(land.QuerySeparator) + len(it.Group)
	if pk > MaxPartitionKey {
		return fmt.Errorf("%w: the partition key (query, %q, group) has %d bytes, DynamoDB's limit is %d", land.ErrRefused, land.QuerySeparator, pk, MaxPartitionKey)
	}
	if size := l.itemSize(it); size > MaxItem {
		return fmt.Errorf("%w: the item (key, value and their attributes) has %d bytes, DynamoDB's limit is 400 KB (%d bytes)", land.ErrRefused, size, MaxItem)
	}
	if !utf8.ValidString(it.Query) || !utf8.Valid(it.Key) || !utf8.Valid(it.Value) {
		return fmt.Errorf("%w: the query, key or value is not UTF-8, which DynamoDB strings must be", land.ErrRefused)
	}
	return nil
}

// itemSize is the item's size as DynamoDB counts it: each attribute's
// name and value bytes; a number counts at most 21 bytes (38 digits),
// here at most 12 (20 digits).
func (l *Lander) itemSize(it land.Item) int {
	const num = 12
	n := len(attrPK) + len(it.Query) + len(land.QuerySeparator) + len(it.Group) +
		len(attrValue) + len(it.Value) + len(attrKey) + len(it.Key) +
		len(attrWS) + num + len(attrRev) + num + len(attrWE) + num + len(attrFinal) + 1
	if l.o.Mode == land.History {
		n += len(attrSK) + num
	}
	return n
}

// Get implements land.Lander. It reads consistently.
func (l *Lander) Get(ctx context.Context, ref land.Ref) (land.Stored, error) {
	out, err := l.o.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &l.o.Table, Key: l.Key(ref), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return land.Stored{}, fmt.Errorf("dynamolander: GetItem %v in %s: %w", ref, l.o.Table, err)
	}
	if out.Item == nil {
		return land.Stored{}, fmt.Errorf("%w: %v in %s", land.ErrNotFound, ref, l.o.Table)
	}
	return decodeItem(out.Item)
}

func decodeItem(m map[string]types.AttributeValue) (land.Stored, error) {
	var st land.Stored
	s := func(name string) (string, error) {
		switch v := m[name].(type) {
		case *types.AttributeValueMemberS:
			return v.Value, nil
		case *types.AttributeValueMemberN:
			return v.Value, nil
		}
		return "", fmt.Errorf("%w: attribute %s is %T", ErrItem, name, m[name])
	}
	var err error
	var v, k, ws, rev, we string
	for _, f := range []struct {
		name string
		dst  *string
	}{{attrValue, &v}, {attrKey, &k}, {attrWS, &ws}, {attrRev, &rev}, {attrWE, &we}} {
		if *f.dst, err = s(f.name); err != nil {
			return st, err
		}
	}
	st.Value, st.Key = []byte(v), []byte(k)
	if st.Version.WindowStart, err = strconv.ParseInt(ws, 10, 64); err != nil {
		return st, fmt.Errorf("%w: window_start %q", ErrItem, ws)
	}
	if st.Version.Revision, err = strconv.ParseUint(rev, 10, 64); err != nil {
		return st, fmt.Errorf("%w: revision %q", ErrItem, rev)
	}
	if st.WindowEnd, err = strconv.ParseInt(we, 10, 64); err != nil {
		return st, fmt.Errorf("%w: window_end %q", ErrItem, we)
	}
	f, ok := m[attrFinal].(*types.AttributeValueMemberBOOL)
	if !ok {
		return st, fmt.Errorf("%w: attribute final is %T", ErrItem, m[attrFinal])
	}
	st.Final = f.Value
	return st, nil
}

// Close implements land.Lander; it leaves the client open.
func (l *Lander) Close() error {
	l.closed.Store(true)
	return nil
}

// Scan implements land.Scanner with a consistent, paginated table scan.
func (l *Lander) Scan(ctx context.Context, fn func(land.Ref, land.Stored) error) error {
	p := dynamodb.NewScanPaginator(l.o.Client, &dynamodb.ScanInput{TableName: &l.o.Table, ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("dynamolander: scanning %s: %w", l.o.Table, err)
		}
		for _, item := range page.Items {
			pk, ok := item[attrPK].(*types.AttributeValueMemberS)
			if !ok {
				return fmt.Errorf("%w: pk is %T", ErrItem, item[attrPK])
			}
			q, g, ok := strings.Cut(pk.Value, land.QuerySeparator)
			if !ok {
				return fmt.Errorf("%w: pk %q has no %q", ErrItem, pk.Value, land.QuerySeparator)
			}
			ref := land.Ref{Query: q, Group: []byte(g)}
			if l.o.Mode == land.History {
				sk, ok := item[attrSK].(*types.AttributeValueMemberN)
				if !ok {
					return fmt.Errorf("%w: sk is %T", ErrItem, item[attrSK])
				}
				if ref.WindowStart, err = strconv.ParseInt(sk.Value, 10, 64); err != nil {
					return fmt.Errorf("%w: sk %q", ErrItem, sk.Value)
				}
			}
			st, err := decodeItem(item)
			if err != nil {
				return err
			}
			if err := fn(ref, st); err != nil {
				return err
			}
		}
	}
	return nil
}
