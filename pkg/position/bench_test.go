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
