module github.com/dubflow/dubflow/proto

go 1.26.0
