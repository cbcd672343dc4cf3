package position_test

import (
	"errors"
	"fmt"

	"github.com/ssegate/ssegate/pkg/position"
)

func ExampleParse() {
	v, err := position.Parse("v1:0-5812.1-5790.2-5833")
	if err != nil {
		panic(err)
	}
	off, ok := v.Offset(1)
	fmt.Println(v.Len(), off, ok)

	_, err = position.Parse("v1:0-5812.0-5790")
	fmt.Println(errors.Is(err, position.ErrDuplicate))
	fmt.Println(err)
	// Output:
	// 3 5790 true
	// true
	// position: malformed id at byte 10 near "0-5790": duplicate partition
}

func ExampleVector_Set() {
	var v position.Vector // the empty vector, "v1:"
	v.Set(2, 10)
	v.Set(0, 7)
	v.Set(2, 11)
	fmt.Println(v)
	// Output: v1:0-7.2-11
}

func ExampleVector_AppendText() {
	v := position.MustParse("v1:0-1.3-9")
	buf := make([]byte, 0, 64)
	buf = append(buf, "id: "...)
	buf, _ = v.AppendText(buf)
	buf = append(buf, '\n')
	fmt.Printf("%s", buf)
	// Output: id: v1:0-1.3-9
}

func ExampleCompare() {
	a := position.MustParse("v1:0-5.1-6")
	b := position.MustParse("v1:0-5.1-7.2-0")
	c := position.MustParse("v1:0-9")
	fmt.Println(position.Compare(a, b), position.Compare(b, a), position.Compare(a, c))
	// Output: before after concurrent
}
