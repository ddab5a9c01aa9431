// Package compare measures klauspost/reedsolomon, the fastest erasure-coding
// library we know of, on the shapes `lowtail bench codec` measures, so the two
// can be compared on the same machine. It is a measurement tool only: nothing
// in lowtail depends on it, and CI does not run it.
//
// Run single-threaded (lowtail's figures are single-thread CPU time; the
// library splits large shards across goroutines when allowed):
//
//	go test -bench . -benchtime 2s -count 3 -cpu 1
package compare

import (
	"fmt"
	"testing"

	"github.com/klauspost/reedsolomon"
)

// run times encode (lost == 0) or ReconstructData with data shards 0..lost
// missing, reporting throughput in bytes of data input (k × shard bytes),
// as lowtail does.
func run(b *testing.B, k, m, shardBytes, lost int) {
	enc, err := reedsolomon.New(k, m)
	if err != nil {
		b.Fatal(err)
	}
	shards := make([][]byte, k+m)
	for i := range shards {
		shards[i] = make([]byte, shardBytes)
		for j := range shards[i] {
			shards[i][j] = byte(i*7 + j*13)
		}
	}
	if err := enc.Encode(shards); err != nil {
		b.Fatal(err)
	}
	original := append([]byte(nil), shards[0]...)
	b.SetBytes(int64(k * shardBytes))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if lost == 0 {
			if err := enc.Encode(shards); err != nil {
				b.Fatal(err)
			}
			continue
		}
		for l := 0; l < lost; l++ {
			shards[l] = shards[l][:0]
		}
		if err := enc.ReconstructData(shards); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if string(shards[0]) != string(original) {
		b.Fatal("reconstructed shard 0 differs from the original")
	}
}

func BenchmarkCodec(b *testing.B) {
	for _, code := range [][2]int{{6, 3}, {10, 4}, {12, 4}} {
		for _, shardBytes := range []int{64 << 10, 1 << 20} {
			k, m := code[0], code[1]
			for _, lost := range []int{0, 1, m} {
				op := "encode"
				if lost > 0 {
					op = fmt.Sprintf("decode-%d-lost", lost)
				}
				name := fmt.Sprintf("rs-%d-%d/%dKiB/%s", k, m, shardBytes>>10, op)
				b.Run(name, func(b *testing.B) { run(b, k, m, shardBytes, lost) })
			}
		}
	}
}
