// Command etcd is upstream's etcd server, at the version kubernetes requires, for podfit's tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
