# mk/examples.mk — examples/: a custom trainer that reports to ddptop through
# transport/'s public API. Built with `make` (part of all), linked against
# libtransport.a only.
EXAMPLE_BINS := $(BUILD)/examples/custom_trainer

all: $(EXAMPLE_BINS)

$(BUILD)/examples/custom_trainer: $(BUILD)/examples/custom_trainer.o $(BUILD)/libtransport.a
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(LDLIBS_Z) -lm
