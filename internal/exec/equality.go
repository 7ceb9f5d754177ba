package exec

import (
	"encoding/binary"
	"math"
	"unicode/utf8"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/types"
)

// The engine's three equality rules, one function each (docs/contract.md,
// "Equality rules"):
//
//   - group identity (AppendGroupIdentity): which rows are one group;
//     values whose key cells render as the same text are one group.
//   - join equality (appendJoinKey): which rows of a temporal, interval
//     or view join meet; SQL's =, with NaN = NaN.
//   - distinct identity (appendDistinctCell): which values DISTINCT
//     aggregates count once and which dedup keys are copies; SQL's IS NOT
//     DISTINCT FROM.
//
// Join-equal keys are always group-identical, so a host may route a
// join's rows by group identity (IntervalRoute, the Kafka join stages).

// AppendGroupIdentity appends the group identity of a row's GROUP BY
// cells (the expression terms, in order; window terms are not cells of
// it) to dst. It is the one definition of which rows share a group: two rows are in
// the same group exactly when these bytes are equal, and that is exactly
// when their contract key cells are equal bytes. The operator's group
// table, its checkpoint entries and the key it emits (decoded from these
// bytes and rendered by the changelog encoder) all come from it, and so
// does the key a Kafka repartitioning stage routes by.
//
// The bytes are binary and not a contract: they are stable only within
// one version of the engine.
func AppendGroupIdentity(dst []byte, cells []types.Value) []byte {
	for i := range cells {
		dst = appendGroupCell(dst, &cells[i])
	}
	return dst
}

// appendGroupCell appends one cell of a group key: the value's binary form
// (appendKeyBytes) after the key rules that make equal renderings one
// group: a NaN or infinite DOUBLE is NULL (all render as null), -0.0 is
// 0.0, and a VARCHAR that is not valid UTF-8 is repaired (each maximal
// invalid subpart becomes U+FFFD, as the encoder renders it). The decoder
// already repairs its input; the check here covers strings an expression
// built.
func appendGroupCell(b []byte, v *types.Value) []byte {
	if !v.Null {
		switch v.Kind {
		case types.KindDouble:
			if v.F-v.F != 0 { // NaN or ±Inf
				return append(b, 0)
			}
		case types.KindVarchar:
			s := v.S
			if !isASCII(s) && !utf8.ValidString(s) {
				s = changelog.RepairUTF8(s)
			}
			b = append(b, byte(types.KindVarchar)+1)
			b = binary.AppendUvarint(b, uint64(len(s)))
			return append(b, s...)
		}
	}
	return appendKeyBytes(b, *v)
}

// appendJoinKey encodes the non-NULL cells of a join key: two keys are
// join-equal exactly when these bytes are equal. The rule is the group
// identity's (-0.0 is 0.0, invalid UTF-8 repaired as it renders), except
// that NaN, +Inf and -Inf are three values of their own, as SQL's
// equality has them (NaN equals NaN, as in PostgreSQL), where a group key
// renders all three as null. A NULL cell joins nothing: callers check
// for it before encoding.
func appendJoinKey(b []byte, cells []types.Value) []byte {
	for i := range cells {
		v := &cells[i]
		if v.Kind == types.KindDouble && v.F-v.F != 0 {
			switch {
			case math.IsNaN(v.F):
				b = append(b, 0xfe, 'n')
			case v.F > 0:
				b = append(b, 0xfe, '+')
			default:
				b = append(b, 0xfe, '-')
			}
			continue
		}
		b = appendGroupCell(b, v)
	}
	return b
}

// appendDistinctCell appends the distinct identity of v: two values are
// one for DISTINCT aggregates and dedup exactly when these bytes are
// equal. NULL is one value (callers skip it: a DISTINCT aggregate ignores
// NULL, a NULL dedup key deduplicates nothing), -0.0 is 0.0, every NaN is
// one value, +Inf and -Inf are their own, strings compare byte for byte.
func appendDistinctCell(b []byte, v types.Value) []byte { return appendKeyBytes(b, v) }
