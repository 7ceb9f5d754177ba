package dataflow

import (
	"slices"
	"strconv"
	"strings"
)

// PartKind is how rows are spread over a segment's partitions.
type PartKind uint8

const (
	// Any: wherever the producer put them (a source's own partitions).
	Any PartKind = iota
	// Hash: by a hash of some columns under an equality rule, so rows
	// equal under that rule on those columns are in one partition.
	Hash
	// Single: all rows in one partition.
	Single
	// Broadcast: every partition gets every row (a versioned table that
	// every partition of a stream joins with).
	Broadcast
)

// Rule is the equality a hash partitioning places rows by. Each has one
// function in the engine (docs/contract.md, "Equality rules"); two hash
// partitionings place equal rows alike only under the same rule.
type Rule uint8

const (
	// GroupIdentity: two rows are one group exactly when their key bytes
	// are equal.
	GroupIdentity Rule = iota
	// JoinEquality: SQL equality of join keys (NULL equals nothing).
	JoinEquality
	// DistinctIdentity: the identity of a dedup key.
	DistinctIdentity
)

var ruleNames = [...]string{"group identity", "join equality", "distinct identity"}

func (r Rule) String() string { return ruleNames[r] }

// Partitioning is a node's output placement, or the placement an input
// needs.
type Partitioning struct {
	Kind PartKind
	Rule Rule // Hash only
	// Cols are the row's columns (ordinals of the node's output row) a
	// Hash partitioning hashes, in order.
	Cols []int
	// Exprs names the values hashed when they are expressions over the
	// row rather than its columns (a GROUP BY expression, a join key
	// expression): such a placement satisfies only its own consumer.
	Exprs []string
	// Reads holds, for each of Exprs, the row's columns it reads. Rows
	// equal on those columns have one value of the expression, so a
	// placement by expressions of a need's columns serves that need.
	Reads [][]int
	// Names are the columns' names, for explain.
	Names []string
}

// Satisfies reports whether rows placed by have are placed as need asks:
// need is Any; or both are Single, or both Broadcast; or have is Single
// and need is Hash (one partition holds every group); or both are Hash,
// have's rule places need's equal rows together (the same rule, or group
// identity for a join equality: values that join are always one group,
// docs/contract.md), and either both hash the same expressions and
// columns, or need hashes plain columns only and have hashes some of
// them and expressions reading only them (rows equal on need's columns
// then have one hashed value, so they are in one partition).
func Satisfies(have, need Partitioning) bool {
	switch need.Kind {
	case Any:
		return true
	case Single, Broadcast:
		return have.Kind == need.Kind
	}
	if have.Kind == Single {
		return true
	}
	if have.Kind != Hash || have.Rule != need.Rule && !(have.Rule == GroupIdentity && need.Rule == JoinEquality) {
		return false
	}
	if len(have.Exprs) > 0 && slices.Equal(have.Exprs, need.Exprs) && slices.Equal(have.Cols, need.Cols) {
		return true
	}
	if len(need.Exprs) > 0 || len(have.Cols)+len(have.Exprs) == 0 {
		// Rows equal on a need's expression may differ on every column.
		return false
	}
	if !isSubset(have.Cols, need.Cols) {
		return false
	}
	for i := range have.Exprs {
		if i >= len(have.Reads) || len(have.Reads[i]) == 0 || !isSubset(have.Reads[i], need.Cols) {
			return false
		}
	}
	return true
}

// provided is the placement an exchange gives a consumer that needs need:
// need itself, but a join key hashed by group identity (as Kafka's routers
// place it), which serves a join and also a GROUP BY of the key's columns.
func provided(need Partitioning) Partitioning {
	if need.Kind == Hash && need.Rule == JoinEquality {
		need.Rule = GroupIdentity
	}
	return need
}

func (p Partitioning) String() string {
	switch p.Kind {
	case Any:
		return "any"
	case Single:
		return "single"
	case Broadcast:
		return "broadcast"
	}
	var parts []string
	for i, c := range p.Cols {
		name := "#" + strconv.Itoa(c)
		if i < len(p.Names) && p.Names[i] != "" {
			name = p.Names[i]
		}
		parts = append(parts, name)
	}
	parts = append(parts, p.Exprs...)
	return "hash(" + strings.Join(parts, ", ") + ") by " + p.Rule.String()
}
