// Package usage is the deduplicating usage-event log used for billing.
//
// The contract, independent of the store behind it:
//
//   - At most one logical row per deduplication key. A retried Write never adds
//     a second logical event for a key that already landed; the first copy to
//     land wins, and its facts are what every read reports.
//   - Every supported read (Aggregate, ListEvents, Get) is exact at the moment
//     it runs: it never depends on a background merge having happened.
//   - Aggregates cover the half-open interval [From, To) at millisecond
//     resolution, so consecutive periods tile with no gap and no overlap.
//   - Dimension filters are typed equality: the number 5 does not match the
//     string "5", and an explicit null is not the same as a missing dimension.
//     A number is its exact decimal value (5 and 5.0 are one number,
//     9007199254740993 and 9007199254740992 two), never a binary float.
//   - ListEvents pages in ingestion order behind a visibility watermark, so a
//     reader that keeps following Page.Next sees every row exactly once, even
//     while writers insert concurrently. A cursor is bound to its query, table
//     and store.
//
// This package holds the types, validation, cursor encoding and the Log
// interface; it imports no store. The backends live in usage/pgusage
// (PostgreSQL) and usage/chusage (ClickHouse over HTTP), and usage/usagetest
// is the conformance suite both of them run. README.md in this directory is
// the user-facing explanation of what is exact, what is eventual, and which
// query is safe to bill from.
package usage
