-- nightly
do $$begin perform 1; end$$