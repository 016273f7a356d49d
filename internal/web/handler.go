package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
)

// Cache-Control values (docs/webapp.md).
const (
	// cacheNoStore is for the entry page and every fallback: a page must
	// always fetch the latest asset manifest, and a 404 for an asset must
	// not outlive the release that fixes it.
	cacheNoStore = "no-store"
	// cacheImmutable is for hashed assets: their name changes whenever
	// their content does.
	cacheImmutable = "public, max-age=31536000, immutable"
	// cacheRevalidate is for the few unhashed files at the root (icons):
	// cached, but checked against their ETag on each use.
	cacheRevalidate = "no-cache"
)

// assetsDir is where the bundler puts hashed files.
const assetsDir = "assets/"

// Handler serves the app: the entry page, the files of the build, and the
// fallback for what the build does not have. It is read-only after New,
// so one Handler serves any number of requests at once.
type Handler struct {
	files map[string]*file // by path relative to the root, no leading slash
	index *file
	// csp is the Content-Security-Policy of every response (csp.go),
	// computed from index's inline scripts.
	csp string
	// connect adds origins to the policy's connect-src (WithConnectSources).
	connect func() []string
}

// file is one built file, held in memory with its gzip form: the whole app
// is a few hundred kilobytes, and compressing once at start-up costs less
// than compressing per request or shipping a second copy in the binary.
type file struct {
	body        []byte
	gz          []byte // nil when compressing does not pay
	contentType string
	etag        string
}

// New reads every file of fsys, which must have index.html at its root.
func New(fsys fs.FS) (*Handler, error) {
	h := &Handler{files: map[string]*file{}}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		f := &file{body: b, contentType: contentTypeOf(p), etag: etagOf(b)}
		if compressible(f.contentType) {
			f.gz = gzipIfSmaller(b)
		}
		h.files[p] = f
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read app files: %w", err)
	}
	h.index = h.files["index.html"]
	if h.index == nil {
		return nil, errors.New("the app has no index.html")
	}
	h.csp = pagePolicy(h.index.body)
	return h, nil
}

// ServeHTTP answers a GET or HEAD for anything the app may be asked for:
//
//   - "/" and "/index.html": the entry page, no-store;
//   - a file of the build: under /assets/ immutable, elsewhere revalidated;
//   - anything else that is a page navigation (Accept has text/html and the
//     last path segment has no extension): the entry page as the fallback,
//     so client routes and links to a removed asset directory both land in
//     the app, no-store;
//   - anything else (a removed hashed script, a missing icon): 404 in the
//     API's JSON envelope, no-store, never a 500.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", h.ContentSecurityPolicy())
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeEnvelope(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED",
			"This endpoint does not support the "+r.Method+" method.")
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	switch f := h.files[name]; {
	case name == "" || name == "index.html":
		h.serveFile(w, r, h.index, cacheNoStore)
	case f != nil && strings.HasPrefix(name, assetsDir):
		h.serveFile(w, r, f, cacheImmutable)
	case f != nil:
		h.serveFile(w, r, f, cacheRevalidate)
	case isNavigation(r):
		h.serveFile(w, r, h.index, cacheNoStore)
	default:
		writeEnvelope(w, http.StatusNotFound, "NOT_FOUND", "No such file.")
	}
}

// isNavigation tells a person opening a page from a script, stylesheet or
// API call: browsers send Accept: text/html only for documents, and client
// routes never carry an extension while files always do.
func isNavigation(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html") &&
		path.Ext(path.Base(r.URL.Path)) == ""
}

func (h *Handler) serveFile(w http.ResponseWriter, r *http.Request, f *file, cacheControl string) {
	hdr := w.Header()
	hdr.Set("Cache-Control", cacheControl)
	hdr.Set("Content-Type", f.contentType)
	hdr.Set("X-Content-Type-Options", "nosniff")
	if f.gz != nil {
		hdr.Add("Vary", "Accept-Encoding")
	}
	body := f.body
	etag := f.etag
	if f.gz != nil && acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body = f.gz
		etag = strings.TrimSuffix(etag, `"`) + `-gz"`
		hdr.Set("Content-Encoding", "gzip")
	}
	// no-store responses carry no validator: nothing may keep them.
	if cacheControl != cacheNoStore {
		hdr.Set("ETag", etag)
		if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// writeEnvelope answers in the API's envelope (docs/api.md). The package
// writes it itself rather than importing httpapi, which imports this one.
func writeEnvelope(w http.ResponseWriter, status int, code, message string) {
	hdr := w.Header()
	hdr.Set("Cache-Control", cacheNoStore)
	hdr.Set("Content-Type", "application/json; charset=utf-8")
	hdr.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, "{\"code\":%q,\"message\":%q,\"data\":null}\n", code, message)
}

// etagOf is a strong validator from the content, so identical files in two
// releases keep their validator.
func etagOf(b []byte) string {
	sum := sha256.Sum256(b)
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`
}

func etagMatches(header, etag string) bool {
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimPrefix(strings.TrimSpace(part), "W/")
		if part == "*" || part == etag {
			return true
		}
	}
	return false
}

// acceptsGzip reads Accept-Encoding with its q-values: "gzip;q=0" is a
// refusal, and "*" accepts gzip unless gzip itself is refused.
func acceptsGzip(header string) bool {
	star := false
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		ok := true
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && q == 0 {
					ok = false
				}
			}
		}
		switch coding {
		case "gzip", "x-gzip":
			return ok
		case "*":
			star = ok
		}
	}
	return star
}

func gzipIfSmaller(b []byte) []byte {
	if len(b) < 256 {
		return nil // headers and framing outweigh the saving
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	if buf.Len() >= len(b) {
		return nil
	}
	return buf.Bytes()
}
