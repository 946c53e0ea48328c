module github.com/dubflow/dubflow/services/mux_video

go 1.26.0
