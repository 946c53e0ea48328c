module github.com/dubflow/dubflow/migrations

go 1.26.0
