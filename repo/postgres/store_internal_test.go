package postgres

import (
	"reflect"
	"strings"
	"testing"
)

// TestLeaseRowFields: the explicit scan targets of the hot statements follow
// leaseColumns (and a read's version and timeline) in order, so that
// every column lands in the field its db tag names.
func TestLeaseRowFields(t *testing.T) {
	t.Parallel()
	var columns []string
	for _, c := range strings.Split(leaseColumns, ",") {
		c = strings.TrimSpace(c)
		if _, alias, ok := strings.Cut(c, " AS "); ok {
			c = alias
		}
		columns = append(columns, c)
	}
	check := func(name string, row any, targets []any, want []string) {
		t.Helper()
		tags := map[uintptr]string{} // field address -> db tag
		var walk func(v reflect.Value)
		walk = func(v reflect.Value) {
			for i := range v.NumField() {
				f, sf := v.Field(i), v.Type().Field(i)
				if sf.Anonymous {
					walk(f)
					continue
				}
				tags[f.Addr().Pointer()] = sf.Tag.Get("db")
			}
		}
		walk(reflect.ValueOf(row).Elem())
		var got []string
		for _, target := range targets {
			got = append(got, tags[reflect.ValueOf(target).Pointer()])
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: scan targets are the fields %q, want the columns %q", name, got, want)
		}
	}
	var lr leaseRow
	check("leaseRow", &lr, lr.fields(), columns)
	var rr readRow
	check("readRow", &rr, rr.fields(), append(append([]string{}, columns...), "version", "wal_timeline"))
}
