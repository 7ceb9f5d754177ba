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
	// Names are the columns' names, for explain.
	Names []string
}

// Satisfies reports whether rows placed by have are placed as need asks:
// need is Any; or both are Single, or both Broadcast; or have is Single
// and need is Hash (one partition holds every group); or both are Hash
// under the same rule and have hashes a non-empty subset of need's plain
// columns and no expression (rows equal on need's columns are then equal
// on have's, so they are in one partition), or both hash the same
// expressions and columns.
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
	if have.Kind != Hash || have.Rule != need.Rule {
		return false
	}
	if len(have.Exprs) > 0 { // an expression's placement serves only its own kind
		return slices.Equal(have.Exprs, need.Exprs) && slices.Equal(have.Cols, need.Cols)
	}
	if len(have.Cols) == 0 {
		return false
	}
	for _, c := range have.Cols {
		if !slices.Contains(need.Cols, c) {
			return false
		}
	}
	return true
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
