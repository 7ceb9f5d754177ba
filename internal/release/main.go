// Command release is the Go half of scripts/release.sh: it lists the
// modules a release of the ubik command publishes, sets their requirements
// on each other to the release's version, and writes them as a module proxy
// (the file tree GOPROXY=file://DIR serves). scripts/release.sh does the git
// side: the copy of the tree, the release commit and its tags.
//
//	release modules ROOT                    the published modules' directories
//	release rewrite ROOT VERSION DIR...     requirements on them (in DIR/go.mod
//	                                        and go.work) set to VERSION
//	release proxy ROOT VERSION TIME OUT DIR...  OUT/<module>/@v/VERSION.{info,mod,zip}
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

const usage = "usage: release modules ROOT | rewrite ROOT VERSION DIR... | proxy ROOT VERSION TIME OUT DIR..."

func run(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("%s", usage)
	}
	root := args[1]
	switch {
	case args[0] == "modules" && len(args) == 2:
		dirs, err := published(root)
		if err != nil {
			return err
		}
		for _, d := range dirs {
			fmt.Println(d)
		}
		return nil
	case args[0] == "rewrite" && len(args) >= 3:
		if err := checkVersion(args[2]); err != nil {
			return err
		}
		for _, d := range args[3:] {
			if err := rewrite(root, d, args[2]); err != nil {
				return err
			}
		}
		if len(args) == 3 {
			return nil
		}
		return rewriteWork(root, args[2])
	case args[0] == "proxy" && len(args) >= 6:
		return writeProxy(root, args[2], args[3], args[4], args[5:])
	}
	return fmt.Errorf("%s", usage)
}
