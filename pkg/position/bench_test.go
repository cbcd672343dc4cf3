package position

import (
	"strconv"
	"testing"
)

var benchSizes = []int{3, 64}

func BenchmarkParse(b *testing.B) {
	for _, n := range benchSizes {
		id := benchVector(n).String()
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(id)))
			for b.Loop() {
				if _, err := Parse(id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAppendText(b *testing.B) {
	for _, n := range benchSizes {
		v := benchVector(n)
		buf := make([]byte, 0, v.textLen())
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(v.textLen()))
			for b.Loop() {
				buf, _ = v.AppendText(buf[:0])
			}
		})
	}
}

func BenchmarkSet(b *testing.B) {
	for _, n := range benchSizes {
		v := benchVector(n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			var off int64
			for b.Loop() {
				off++
				v.Set(int32(off%int64(n)), off)
			}
		})
	}
}

// BenchmarkAppendCompact frames a compact id against a checkpoint of n partitions, 16 of which moved (about
// what a gateway's ids carry before it starts a new checkpoint): once per record per pod.
func BenchmarkAppendCompact(b *testing.B) {
	for _, n := range []int{64, 256} {
		base := benchVector(n)
		pos := base.Clone()
		for i := range 16 {
			e := pos.At(i * n / 16)
			pos.Set(e.Partition, e.Offset+3)
		}
		buf := make([]byte, 0, MaxCompactLen)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var ok bool
				if buf, ok = AppendCompact(buf[:0], Ref{Offset: 123456}, base, pos, 256); !ok {
					b.Fatal("refused")
				}
			}
		})
	}
}

// BenchmarkParseCompact parses and applies a compact id of 16 entries against a checkpoint of 256 partitions:
// once per resume.
func BenchmarkParseCompact(b *testing.B) {
	base := benchVector(256)
	pos := base.Clone()
	for i := range 16 {
		e := pos.At(i * 16)
		pos.Set(e.Partition, e.Offset+3)
	}
	id, _ := AppendCompact(nil, Ref{Offset: 123456}, base, pos, 256)
	b.ReportAllocs()
	for b.Loop() {
		c, err := ParseCompact(string(id))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Apply(base); err != nil {
			b.Fatal(err)
		}
	}
}
