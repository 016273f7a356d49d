package deliver

import (
	"changeflow/internal/sim/simhttp"
	"context"
	"net/http"
	"strconv"
	"time"
)

// RegisterControl adds the delivery control API to mux under prefix (for
// example "/_control/deliveries"), so every simulator that owns a
// Deliverer exposes the same endpoints:
//
//	GET    prefix               the log, the faults in force, the held count
//	DELETE prefix               clear the log
//	GET    prefix/faults        the faults in force
//	POST   prefix/faults        change faults (FaultsPatch; absent fields stay)
//	DELETE prefix/faults        every fault off, held deliveries released
//	POST   prefix/pause         hold deliveries from now on
//	POST   prefix/resume        release held ones; {"reverse":true} newest first
//	POST   prefix/wait?timeoutMs=N  answer when nothing is in flight (204) or 504
func (d *Deliverer) RegisterControl(mux *http.ServeMux, prefix string) {
	mux.HandleFunc("GET "+prefix, func(w http.ResponseWriter, r *http.Request) {
		simhttp.WriteJSON(w, http.StatusOK, map[string]any{
			"targets": d.Targets(), "faults": d.Faults(), "held": d.Held(), "deliveries": d.Log(),
		})
	})
	mux.HandleFunc("DELETE "+prefix, func(w http.ResponseWriter, r *http.Request) {
		d.ClearLog()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET "+prefix+"/faults", func(w http.ResponseWriter, r *http.Request) {
		simhttp.WriteJSON(w, http.StatusOK, d.Faults())
	})
	mux.HandleFunc("POST "+prefix+"/faults", func(w http.ResponseWriter, r *http.Request) {
		var p FaultsPatch
		if err := simhttp.ReadJSON(r, &p); err != nil {
			simhttp.WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		simhttp.WriteJSON(w, http.StatusOK, d.SetFaults(p))
	})
	mux.HandleFunc("DELETE "+prefix+"/faults", func(w http.ResponseWriter, r *http.Request) {
		d.ResetFaults()
		simhttp.WriteJSON(w, http.StatusOK, d.Faults())
	})
	mux.HandleFunc("POST "+prefix+"/pause", func(w http.ResponseWriter, r *http.Request) {
		d.Pause()
		simhttp.WriteJSON(w, http.StatusOK, d.Faults())
	})
	mux.HandleFunc("POST "+prefix+"/resume", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Reverse bool `json:"reverse"`
		}
		if err := simhttp.ReadJSON(r, &body); err != nil {
			simhttp.WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		simhttp.WriteJSON(w, http.StatusOK, map[string]int{"released": d.Resume(body.Reverse)})
	})
	mux.HandleFunc("POST "+prefix+"/wait", func(w http.ResponseWriter, r *http.Request) {
		timeout := 10 * time.Second
		if v := r.URL.Query().Get("timeoutMs"); v != "" {
			ms, err := strconv.Atoi(v)
			if err != nil || ms < 0 {
				simhttp.WriteError(w, http.StatusBadRequest, "timeoutMs must be a non-negative integer")
				return
			}
			timeout = time.Duration(ms) * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		if err := d.Wait(ctx); err != nil {
			simhttp.WriteError(w, http.StatusGatewayTimeout, "deliveries still in flight")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
