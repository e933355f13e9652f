python3 demo.py naive # today: the refund lands twice
python3 demo.py 2 # Interlock: lands once, receipt says so
python3 demo.py 3 # Interlock against an API that can't help: refuses to guess
