package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"changeflow/internal/domain"
)

// trickyStrings are what the hand encoder must escape as encoding/json
// does.
var trickyStrings = []string{
	"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnew\nline\rcr\bbs\fff",
	"\x00\x01\x1f\x7f", "é ü 漢字 🚀", "\u2028\u2029", "bad \xff utf-8 \xc3", "\xed\xa0\x80 surrogate",
}

// fillEvery sets every field of the struct v points to, recursively, to
// a non-zero value derived from n (a string from trickyStrings, a time in
// a zone of its own): a field added to requestView — or to a view it
// holds — is set here without anyone listing it.
func fillEvery(t *testing.T, v reflect.Value, n int) {
	t.Helper()
	for i := range v.NumField() {
		f, n := v.Field(i), n+i
		switch {
		case f.Type() == reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(time.Date(2020+n%9, time.Month(1+n%12), 1+n%28, n%24, n%60, n%60, n*1000003, time.FixedZone("Z", (n%5-2)*3600))))
		case f.Kind() == reflect.String:
			f.SetString(trickyStrings[1+n%(len(trickyStrings)-1)] + fmt.Sprint(n))
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
			f.SetInt(int64(n*1000 + 1))
		case f.Kind() == reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
			switch {
			case f.Elem().Type() == reflect.TypeFor[time.Time]():
				f.Elem().Set(reflect.ValueOf(time.Date(2031, 5, 6, 7, 8, 9, n, time.UTC)))
			case f.Elem().Kind() == reflect.Struct:
				fillEvery(t, f.Elem(), n*7)
			default:
				t.Fatalf("requestView has a pointer to %s (%s): teach appendJSON and this test about it", f.Elem().Type(), v.Type().Field(i).Name)
			}
		case f.Kind() == reflect.Struct:
			fillEvery(t, f, n*3)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			// n%3 elements: an empty list (not nil: "[]", not "null")
			// as well as one and two.
			f.Set(reflect.MakeSlice(f.Type(), n%3, n%3))
			for j := range f.Len() {
				fillEvery(t, f.Index(j), n*5+j)
			}
		default:
			t.Fatalf("requestView has a field of kind %s (%s): teach appendJSON and this test about it", f.Kind(), v.Type().Field(i).Name)
		}
	}
}

// checkViewJSON compares the hand encoder with encoding/json for v.
func checkViewJSON(t *testing.T, v requestView) {
	t.Helper()
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.appendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("appendJSON\n%s\nencoding/json\n%s", got, want)
	}
}

// The hand-encoded status read is encoding/json's bytes: for a view with
// every field set, with each field in turn at its zero value (omitempty),
// for the zero view, and through respondView's envelope against
// respond's.
func TestRequestViewJSONIsEncodingJSONs(t *testing.T) {
	for n := range 40 {
		var full requestView
		fillEvery(t, reflect.ValueOf(&full).Elem(), n)
		checkViewJSON(t, full)
		rv := reflect.ValueOf(&full).Elem()
		for i := range rv.NumField() {
			v := full
			f := reflect.ValueOf(&v).Elem().Field(i)
			f.Set(reflect.Zero(f.Type()))
			checkViewJSON(t, v)
		}
	}
	checkViewJSON(t, requestView{})

	var v requestView
	fillEvery(t, reflect.ValueOf(&v).Elem(), 3)
	logger := slog.New(slog.DiscardHandler)
	for range 3 { // a pooled buffer reused gives the same bytes
		viaRespond, viaView := httptest.NewRecorder(), httptest.NewRecorder()
		respond(viaRespond, logger, domain.CodeOK, v)
		respondView(viaView, logger, &v)
		if viaView.Code != viaRespond.Code || !reflect.DeepEqual(viaView.Header(), viaRespond.Header()) ||
			viaView.Body.String() != viaRespond.Body.String() {
			t.Fatalf("respondView %d %v\n%s\nrespond %d %v\n%s", viaView.Code, viaView.Header(), viaView.Body,
				viaRespond.Code, viaRespond.Header(), viaRespond.Body)
		}
	}
}

// A time encoding/json refuses is answered as respond answers it (the
// header already out, no body), not with bytes encoding/json would not
// write.
func TestRespondViewRefusesWhatEncodingJSONRefuses(t *testing.T) {
	for _, at := range []time.Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2030, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 25*3600))} {
		v := requestView{CreatedAt: at}
		if _, err := json.Marshal(v); err == nil {
			t.Fatalf("%v: encoding/json encodes it", at)
		}
		if _, err := v.appendJSON(nil); err == nil {
			t.Fatalf("%v: appendJSON encodes it", at)
		}
		viaRespond, viaView := httptest.NewRecorder(), httptest.NewRecorder()
		respond(viaRespond, slog.New(slog.DiscardHandler), domain.CodeOK, v)
		respondView(viaView, slog.New(slog.DiscardHandler), &v)
		if viaView.Code != viaRespond.Code || viaView.Body.String() != viaRespond.Body.String() {
			t.Fatalf("%v: respondView %d %q, respond %d %q", at, viaView.Code, viaView.Body, viaRespond.Code, viaRespond.Body)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: appendJSONString %s, encoding/json %s", s, got, want)
		}
	})
}

// respondView allocates nothing once its pool is warm (the point of it).
func TestRespondViewAllocations(t *testing.T) {
	var v requestView
	fillEvery(t, reflect.ValueOf(&v).Elem(), 5)
	w := discardWriter{h: make(map[string][]string)}
	logger := slog.New(slog.DiscardHandler)
	respondView(w, logger, &v)
	if n := testing.AllocsPerRun(200, func() { respondView(w, logger, &v) }); n != 0 {
		t.Fatalf("%v allocations per answer", n)
	}
}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h map[string][]string }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(b []byte) (int, error) { return io.Discard.Write(b) }
func (d discardWriter) WriteHeader(int)             {}
