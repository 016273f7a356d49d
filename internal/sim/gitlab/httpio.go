package gitlab

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// writeJSON writes v as GitLab does: plain JSON, no envelope.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes GitLab's error body {"message": …}.
func writeError(w http.ResponseWriter, status int, msg any) {
	writeJSON(w, status, map[string]any{"message": msg})
}

// writeParamError writes Grape's parameter-validation body {"error": …}.
func writeParamError(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": msg})
}

// params reads request parameters the way Grape does: from the query, a
// form body or a JSON body (what client-go sends for POST and PUT).
type params struct {
	json  map[string]json.RawMessage
	form  url.Values
	query url.Values
}

func readParams(r *http.Request) (params, error) {
	p := params{query: r.URL.Query(), form: url.Values{}}
	if r.Body == nil || r.Method == http.MethodGet {
		return p, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		return p, err
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	trimmed := bytes.TrimSpace(body)
	switch {
	case ct == "application/json" || (ct == "" && len(trimmed) > 0 && trimmed[0] == '{'):
		if len(trimmed) > 0 {
			if err := json.Unmarshal(trimmed, &p.json); err != nil {
				return p, err
			}
		}
	case ct == "application/x-www-form-urlencoded":
		if p.form, err = url.ParseQuery(string(body)); err != nil {
			return p, err
		}
	}
	return p, nil
}

// str returns a scalar parameter as text and whether it was given.
func (p params) str(name string) (string, bool) {
	if raw, ok := p.json[name]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, true
		}
		if string(raw) == "null" {
			return "", false
		}
		return string(raw), true
	}
	if p.form.Has(name) {
		return p.form.Get(name), true
	}
	if p.query.Has(name) {
		return p.query.Get(name), true
	}
	return "", false
}

func (p params) get(name string) string {
	s, _ := p.str(name)
	return s
}

func (p params) boolean(name string) bool {
	s, _ := p.str(name)
	b, _ := strconv.ParseBool(s)
	return b
}

func (p params) raw(name string) (json.RawMessage, bool) {
	raw, ok := p.json[name]
	return raw, ok
}

// paginate cuts items to the requested page and sets GitLab's pagination
// headers (X-Page, X-Per-Page, X-Total, X-Total-Pages, X-Next-Page,
// X-Prev-Page and Link).
func paginate[T any](w http.ResponseWriter, r *http.Request, items []T) []T {
	q := r.URL.Query()
	page, _ := strconv.Atoi(q.Get("page"))
	if page < 1 {
		page = 1
	}
	per, _ := strconv.Atoi(q.Get("per_page"))
	if per < 1 {
		per = 20
	}
	if per > 100 {
		per = 100
	}
	total := len(items)
	pages := (total + per - 1) / per
	if pages == 0 {
		pages = 1
	}
	h := w.Header()
	h.Set("X-Page", strconv.Itoa(page))
	h.Set("X-Per-Page", strconv.Itoa(per))
	h.Set("X-Total", strconv.Itoa(total))
	h.Set("X-Total-Pages", strconv.Itoa(pages))
	next, prev := "", ""
	if page < pages {
		next = strconv.Itoa(page + 1)
	}
	if page > 1 {
		prev = strconv.Itoa(page - 1)
	}
	h.Set("X-Next-Page", next)
	h.Set("X-Prev-Page", prev)
	link := func(rel string, n int) string {
		u := requestURL(r)
		v := u.Query()
		v.Set("page", strconv.Itoa(n))
		v.Set("per_page", strconv.Itoa(per))
		u.RawQuery = v.Encode()
		return "<" + u.String() + `>; rel="` + rel + `"`
	}
	var links []string
	if prev != "" {
		links = append(links, link("prev", page-1))
	}
	if next != "" {
		links = append(links, link("next", page+1))
	}
	links = append(links, link("first", 1), link("last", pages))
	h.Set("Link", strings.Join(links, ", "))
	start := (page - 1) * per
	if start >= total {
		return []T{}
	}
	end := min(start+per, total)
	return items[start:end]
}

// requestURL rebuilds the URL the client called, including any prefix a
// mount stripped (RequestURI keeps the original path).
func requestURL(r *http.Request) *url.URL {
	u, err := url.Parse(r.RequestURI)
	if err != nil || u.Path == "" {
		u = &url.URL{Path: r.URL.Path, RawQuery: r.URL.RawQuery}
	}
	u.Scheme = "http"
	if r.TLS != nil {
		u.Scheme = "https"
	}
	u.Host = r.Host
	return u
}
