module github.com/dubflow/dubflow/services/asr

go 1.26.0
