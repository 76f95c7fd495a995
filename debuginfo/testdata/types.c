/*
 * types.c: the shapes a filter config meets, compiled into types.o (an
 * ET_REL, like a module's debuginfo) and types.elf (an ET_EXEC, like a
 * vmlinux) by gen.sh. debuginfo's tests look them up through DWARF.
 */
struct list_head {
	struct list_head *next, *prev;
};

struct inner {
	int a;
	long next; /* found before outer's own next: makedumpfile's depth-first search */
};

typedef struct {
	int anon_x;
} anon_t;

struct outer {
	struct inner in;
	struct outer *next;
	union {
		long u_long;
		char u_bytes[8];
	};
	struct list_head list;
	char name[16];
	char *str;
	void *opaque;
	const void *cv;
	int (*fn)(void);
	unsigned int bits : 3;
	const int carr[4];
	anon_t anon;
	struct outer *ptrs[3];
	enum color { RED, GREEN = 5, BLUE } color;
	int flex[];
};

typedef struct outer outer_t;
typedef outer_t outer2_t;

struct outer outer_var;
struct outer *outer_ptr = &outer_var;
struct outer outer_arr[5];
struct list_head head_var = { &head_var, &head_var };
char *greeting = "hello";
long counter = 42;
outer2_t typedefd_var;
const char cstr[] = "abc";
extern int late_decl[];
int late_decl[7];

/* A list linked by its own next member, for `via`. */
struct node {
	struct node *next;
	char key[8];
	long key_size;
};

struct node node_head;

/* A per-cpu variable: the kind whose type every kernel's BTF holds. */
struct outer pcpu_outer __attribute__((section(".data..percpu")));
