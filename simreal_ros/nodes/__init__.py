"""ROS 2 nodes, one module each: a Node subclass and main()."""
