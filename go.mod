module github.com/ubiksql/ubik

go 1.26.0

require (
	github.com/DataDog/sketches-go v1.4.8
	github.com/axiomhq/hyperloglog v0.3.0
	github.com/dgryski/go-metro v0.0.0-20250106013310-edb8663e5e33
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kadm v1.20.0
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
	github.com/valyala/fastjson v1.6.10
)

require (
	github.com/kamstrup/intmap v0.5.2 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/twmb/franz-go/pkg/kfake => ./third_party/kfake
