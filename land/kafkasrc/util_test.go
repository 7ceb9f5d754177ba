package kafkasrc

import "sync/atomic"

type atomicInt = atomic.Int64
