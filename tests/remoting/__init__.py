"""Tests of service.remoting: wire codec, fastjson dialect, request bodies, ACL signatures, and the ali-ons harness."""
